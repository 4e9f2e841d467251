package client_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestClientDoesNotDependOnServers keeps the public client a client: it
// must not pull in the namenode, datanode, metadata store or CLI.
func TestClientDoesNotDependOnServers(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/plasmafs/plasma/client").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, bad := range []string{"/internal/namenode", "/internal/datanode", "/internal/meta", "/internal/cli", "modernc.org/sqlite"} {
			if strings.HasSuffix(dep, bad) || strings.HasPrefix(dep, bad) {
				t.Errorf("client depends on %s", dep)
			}
		}
	}
}
