package metrics

import (
	"os"
	"path/filepath"
	"testing"
)

// localFile writes n bytes of a pattern to a new local file and returns
// its path.
func localFile(t *testing.T, n int) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "data")
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i * 7)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
