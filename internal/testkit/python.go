package testkit

import (
	"os/exec"
	"strings"
	"testing"
)

// Python returns an interpreter that can import every module listed.
// Debian's python3-numpy and python3-blosc belong to /usr/bin/python3, and
// the python3 first on PATH may be another interpreter without them, so
// both are tried. When none fits the test fails with the install command:
// `make test` installs them, so a missing module is a broken set-up, not a
// reason to skip.
func Python(t testing.TB, modules ...string) string {
	t.Helper()
	imp := "import " + strings.Join(modules, ", ")
	var tried []string
	for _, py := range []string{"/usr/bin/python3", "python3"} {
		path, err := exec.LookPath(py)
		if err != nil {
			continue
		}
		tried = append(tried, path)
		if err := exec.Command(path, "-c", imp).Run(); err == nil {
			return path
		}
	}
	t.Fatalf("no Python interpreter can %q (tried %v); install with: apt-get install -y python3-blosc python3-numpy", imp, tried)
	return ""
}
