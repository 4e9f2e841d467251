package namenode

import (
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/plasmafs/plasma/internal/meta"
)

// TestGenerationsGrowAcrossRestarts: a restarted namenode (a new process:
// the in-memory counter starts from nothing) hands out generations above
// every one of the previous boot, even within the same second.
func TestGenerationsGrowAcrossRestarts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.db")
	st, err := meta.OpenSQLite(path, false)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cfg := Config{Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	var last uint64
	for boot := 0; boot < 3; boot++ {
		n := &Namenode{} // a new process: the counter starts from nothing
		_, first, err := loadStarting(cfg)
		if err != nil {
			t.Fatal(err)
		}
		n.gens.raise(first)
		read := n.currentGen()
		if read <= last {
			t.Fatalf("boot %d: read generation %#x not above the last boot's %#x", boot, read, last)
		}
		if epoch := read >> genShift; epoch < uint64(time.Now().Unix())-60 {
			t.Fatalf("boot %d: epoch %d below the clock", boot, epoch)
		}
		for i := 0; i < 5; i++ {
			g := n.newGen()
			if g <= read || g <= last {
				t.Fatalf("boot %d: allocation generation %#x not above %#x", boot, g, max(read, last))
			}
			last = g
		}
	}
}
