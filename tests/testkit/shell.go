package testkit

import (
	"os/exec"
	"testing"
)

// Shell runs a shell command line in dir and fails the test on error.
func Shell(t *testing.T, dir, cmdline string) string {
	t.Helper()
	cmd := exec.Command("sh", "-c", cmdline)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", cmdline, err, out)
	}
	return string(out)
}
