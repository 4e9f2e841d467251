package datanode

import (
	"os"
	"path/filepath"
	"testing"
)

// TestInitAfterInterruptedInit: a volume whose init was interrupted (its
// files there, its config, written last, not) is made again rather than
// refused, so a Ctrl-C during the first 'make run' does not block the next.
func TestInitAfterInterruptedInit(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "vol")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"data", "crc"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("partial"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := InitWith(dir, "c", 64<<10, 16*64<<10, PreallocZero); err != nil {
		t.Fatalf("init over an interrupted init: %v", err)
	}
	if _, err := InitWith(dir, "c", 64<<10, 16*64<<10, PreallocZero); err == nil {
		t.Fatal("init over a complete volume succeeded")
	}
}
