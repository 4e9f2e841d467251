package cli

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/plasmafs/plasma/internal/clustertest"
)

// TestGetErrorNamesDestination: 'plasma get /f DIR/x' into a directory
// that does not exist names DIR/x and DIR, not the hidden temporary file
// get writes first (".x.plasma-get-NNN"), which the user never named.
func TestGetErrorNamesDestination(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Datanodes: 1, Size: 16 << 20})
	if out, code := c.Run([]byte("data\n"), "put", "-stdin", "/f"); code != 0 {
		t.Fatalf("put: exit %d:\n%s", code, out)
	}
	dst := filepath.Join(t.TempDir(), "missing", "x")
	out, code := c.Run(nil, "get", "/f", dst)
	if code != 1 || !strings.Contains(out, dst+": cannot create it in "+filepath.Dir(dst)) || strings.Contains(out, "plasma-get-") {
		t.Fatalf("plasma get /f %s: exit %d:\n%s\nwant exit 1 naming %s and its directory, not the temporary file", dst, code, out, dst)
	}
}
