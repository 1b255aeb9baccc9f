//go:build !purego

package all

const puregoBuild = false
