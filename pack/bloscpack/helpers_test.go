package bloscpack

import (
	"os/exec"
	"testing"

	"github.com/bloscfs/bloscfs/internal/testkit"
)

func pythonBlosc(t *testing.T) string { return testkit.Python(t, "blosc") }

func runPython(t *testing.T, py, script string, args ...string) string {
	t.Helper()
	out, err := exec.Command(py, append([]string{"-c", script}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("python: %v\n%s", err, out)
	}
	return string(out)
}
