package namenode

import (
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/plasmafs/plasma/internal/meta"
	"github.com/plasmafs/plasma/internal/wire"
)

// TestInoCounter: numbers are unique and increasing; the reservation is
// made before a number at or past the old limit is handed out; a counter
// restarted from the last reservation continues above every number given.
func TestInoCounter(t *testing.T) {
	c := inoCounter{next: 100, limit: 100}
	var reserved []uint64
	reserve := func(l uint64) { reserved = append(reserved, l) }
	seen := map[uint64]bool{}
	var last uint64
	for i := 0; i < 3*inoChunk; i++ {
		ino := c.take(reserve)
		if seen[ino] || ino < last {
			t.Fatalf("number %d after %d (seen before: %v)", ino, last, seen[ino])
		}
		seen[ino], last = true, ino
		if len(reserved) == 0 || ino >= reserved[len(reserved)-1] {
			t.Fatalf("number %d handed out beyond the reservation %v", ino, reserved)
		}
	}
	if len(reserved) != 3 {
		t.Fatalf("%d reservations for 3 chunks: %v", len(reserved), reserved)
	}
	restarted := inoCounter{next: reserved[len(reserved)-1], limit: reserved[len(reserved)-1]}
	if ino := restarted.take(reserve); seen[ino] || ino <= last {
		t.Fatalf("after a restart: %d, the last before was %d", ino, last)
	}
}

// TestInoReservationInStore: through the namenode and a real store, the
// reservation a create's inode number comes from is in the store once the
// commit using that number is durable (read through a second handle, as a
// restart after a crash would), and a namenode started on that store
// hands out numbers above the reservation.
func TestInoReservationInStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nn.db")
	start := func() (*Namenode, *meta.SQLite) {
		store, err := meta.OpenSQLite(path, false)
		if err != nil {
			t.Fatal(err)
		}
		// Fresh: no directory leases were granted, so creates need not
		// wait out their term after the restart either.
		n, err := New(Config{Cluster: "test", Store: store, Fresh: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		return n, store
	}
	mkdir := func(n *Namenode, name string) uint64 {
		n.mu.Lock()
		tx, err := n.getTxn(&conn{}, 1, true)
		if err != nil {
			t.Fatal(err)
		}
		r, err := n.createIn(tx, nil, &wire.Request{Type: wire.TypeDir, Path: "/" + name}, rootIno, name)
		if err != nil {
			t.Fatal(err)
		}
		tx.committing = true
		done := make(chan struct{})
		answer := func() { close(done) }
		req := &commitReq{tx: tx, change: n.prepareCommit(tx), direct: answer, reply: func(error) { answer() }}
		n.mu.Unlock()
		n.cm.submit(req, nil)
		<-done
		return r.Attr.Ino
	}

	n, store := start()
	first := mkdir(n, "a")
	n.mu.Lock()
	reservation := n.inos.limit
	n.mu.Unlock()
	if first >= reservation {
		t.Fatalf("inode %d handed out at or past the reservation %d", first, reservation)
	}
	other, err := meta.OpenSQLite(path, false)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := other.Load(t.Context())
	other.Close()
	if err != nil {
		t.Fatal(err)
	}
	if snap.InoLimit < reservation {
		t.Fatalf("commit of inode %d durable with the store's reservation at %d (the namenode's is %d)", first, snap.InoLimit, reservation)
	}
	n.Close()
	store.Close()

	n, store = start()
	defer store.Close()
	defer n.Close()
	if second := mkdir(n, "b"); second < reservation {
		t.Fatalf("after a restart: inode %d, below the reservation %d (inode %d was handed out before)", second, reservation, first)
	}
}
