// Package testkit holds the helpers shared by the tests of several
// packages: running programs and watching their processes, Python
// interpreters, allocation bounds and guard bytes for the fuzz and
// canary tests, polling for a condition (Eventually), and whether the
// race detector is on (RaceEnabled). Its subpackages make test data
// (fixtures, gridfiles, hostile, the objects of ShardedZarr here),
// serve S3 in process (fakes3) and mount bloscfs for the integration
// tests (mounttest).
//
// Only tests import the test kit: TestOnlyTestsImportKit fails when a
// file the program is built from does.
package testkit
