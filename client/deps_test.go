package client_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/plasmafs/plasma"

// forbiddenDeps are the packages (and everything below them) the public
// client must not depend on: the servers, the metadata store and its SQL
// engine, the CLI.
var forbiddenDeps = []string{
	module + "/internal/namenode",
	module + "/internal/datanode",
	module + "/internal/meta",
	module + "/internal/cli",
	module + "/internal/bench",
	module + "/internal/clustertest",
	"modernc.org/sqlite",
	"modernc.org/libc",
}

// forbidden reports which entry of forbiddenDeps the import path dep is,
// or lies below ("" if none).
func forbidden(dep string) string {
	for _, bad := range forbiddenDeps {
		if dep == bad || strings.HasPrefix(dep, bad+"/") {
			return bad
		}
	}
	return ""
}

// TestForbiddenMatches pins down what forbidden matches, so the test below
// cannot silently match nothing (as a prefix test of "/internal/..."
// against full import paths did).
func TestForbiddenMatches(t *testing.T) {
	for dep, want := range map[string]string{
		module + "/internal/namenode":     module + "/internal/namenode",
		module + "/internal/datanode":     module + "/internal/datanode",
		module + "/internal/meta":         module + "/internal/meta",
		module + "/internal/cli":          module + "/internal/cli",
		module + "/internal/clustertest":  module + "/internal/clustertest",
		"modernc.org/sqlite":              "modernc.org/sqlite",
		"modernc.org/sqlite/lib":          "modernc.org/sqlite",
		"modernc.org/libc/sys/types":      "modernc.org/libc",
		module + "/internal/namenodeish":  "",
		module + "/internal/metadata":     "",
		module + "/internal/wire":         "",
		module + "/internal/rpc":          "",
		module + "/internal/auth":         "",
		module + "/client":                "",
		"example.com/x/internal/namenode": "",
		"modernc.org/sqlitex":             "",
		"golang.org/x/sys/unix":           "",
		module + "/cmd/plasma":            "",
	} {
		if got := forbidden(dep); got != want {
			t.Errorf("forbidden(%q) = %q, want %q", dep, got, want)
		}
	}
}

// TestClientDoesNotDependOnServers keeps the public client a client: it
// must not pull in the namenode, datanode, metadata store or CLI.
func TestClientDoesNotDependOnServers(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", module+"/client").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := strings.Fields(string(out))
	// The list holds full import paths (a dependency the client does
	// have proves it), so the matching above applies to it.
	if !slices.Contains(deps, module+"/internal/wire") {
		t.Fatalf("go list -deps does not list %s/internal/wire; got:\n%s", module, out)
	}
	for _, dep := range deps {
		if bad := forbidden(dep); bad != "" {
			t.Errorf("client depends on %s (forbidden: %s)", dep, bad)
		}
	}
}
