package namenode

import (
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/plasmafs/plasma/internal/meta"
	"github.com/plasmafs/plasma/internal/wire"
)

// TestAllocateWithoutLiveDatanodesIsUnavailable: with datanodes known
// but none registered yet (a namenode just restarted), an allocation is
// refused as unavailable, which clients and mounts wait out, not as out
// of space, which they report (ENOSPC) at once.
func TestAllocateWithoutLiveDatanodesIsUnavailable(t *testing.T) {
	store, err := meta.OpenSQLite(filepath.Join(t.TempDir(), "nn.db"), false)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	c := &meta.Change{
		PutNodes: []meta.Datanode{
			{ID: 1, Identity: "dn1", Blocks: 40, Enabled: true},
			{ID: 2, Identity: "dn2", Blocks: 40, Enabled: true},
		},
		PutInodes:  []meta.Inode{{Ino: 2, Type: meta.TypeFile, Mode: 0o644, User: "root", Group: "root", Nlink: 1, Rep: 2}},
		PutEntries: []meta.Entry{{EntryKey: meta.EntryKey{Parent: rootIno, Name: "f"}, Ino: 2}},
		InoLimit:   100,
	}
	if err := store.Apply(t.Context(), []*meta.Change{c}); err != nil {
		t.Fatal(err)
	}
	n, err := New(Config{Cluster: "test", Blocksize: 64 << 10, Store: store,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	n.mu.Lock()
	defer n.mu.Unlock()
	tx, err := n.getTxn(&conn{}, 1, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, alive := range []int{0, 1} {
		_, err = n.allocateOp(tx, nil, &wire.Request{Ino: 2, Index: 0, Count: 2, Size: 100})
		var oe *opError
		if !errors.As(err, &oe) || oe.code != wire.ErrCodeUnavailable {
			t.Errorf("allocate of replication 2 with %d live datanodes: %v, want unavailable", alive, err)
		}
		for dn := range n.nodes.all() {
			dn.alive = true // the first one registers
			break
		}
	}
}
