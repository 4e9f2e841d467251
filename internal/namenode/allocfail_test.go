package namenode

import (
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/plasmafs/plasma/internal/meta"
	"github.com/plasmafs/plasma/internal/wire"
)

// TestFailedAllocationTakesNothing: an allocation that runs out of space
// after placing part of its blocks fails with ErrCodeNoSpace and leaves
// the datanodes' block maps, the transaction's allocations and its
// user's charge as they were; all the free space can then be allocated.
func TestFailedAllocationTakesNothing(t *testing.T) {
	n := newTwoNodeNamenode(t, 1000)

	n.mu.Lock()
	defer n.mu.Unlock()
	for dn := range n.nodes.all() {
		dn.alive = true // as if registered over a connection
	}
	used := func() (u uint64) {
		for dn := range n.nodes.all() {
			u += dn.used.nused
		}
		return u
	}
	held := func(tx *Txn) (runs int) {
		for _, rs := range tx.allocated {
			runs += len(rs)
		}
		return runs
	}
	tx, err := n.getTxn(&conn{}, 1, true)
	if err != nil {
		t.Fatal(err)
	}
	r, err := n.allocateOp(tx, nil, &wire.Request{Ino: 2, Index: 0, Count: 10})
	if err != nil {
		t.Fatal(err)
	}
	// The extents and the runs the transaction holds carry one generation.
	for _, x := range r.Extents {
		for _, rs := range tx.allocated {
			for _, run := range rs {
				if x.Gen == 0 || run.gen != x.Gen {
					t.Fatalf("extent generation %d, run generation %d", x.Gen, run.gen)
				}
			}
		}
	}
	runs, charged := held(tx), n.txns.held(tx.user)
	if used() != 20 || charged != 20*64<<10 { // bytes: whole blocks on fixed volumes
		t.Fatalf("after 10 blocks of 2 replicas: %d used, %d charged", used(), charged)
	}
	// 30 blocks are free on each node: 30 of 35 are placed before it fails.
	_, err = n.allocateOp(tx, nil, &wire.Request{Ino: 2, Index: 10, Count: 35})
	if !isCode(err, wire.ErrCodeNoSpace) {
		t.Fatalf("allocating past the free space: %v, want ErrCodeNoSpace", err)
	}
	if used() != 20 || held(tx) != runs || n.txns.held(tx.user) != charged || tx.allocCount != charged {
		t.Fatalf("failed allocation left something taken: %d blocks used (want 20), %d runs held (want %d), %d charged (want %d)",
			used(), held(tx), runs, n.txns.held(tx.user), charged)
	}
	if _, err := n.allocateOp(tx, nil, &wire.Request{Ino: 2, Index: 10, Count: 30}); err != nil {
		t.Fatalf("the free space after a failed allocation: %v", err)
	}
	if used() != 80 {
		t.Fatalf("%d blocks used, want all 80", used())
	}
}

// newTwoNodeNamenode is a namenode (closed with the test) on a store with
// two datanodes of 40 blocks, not registered, and file /f (inode 2,
// replication 2); userAllocLimit is its -user-alloc-limit in blocks (0:
// the default).
func newTwoNodeNamenode(t *testing.T, userAllocLimit uint64) *Namenode {
	t.Helper()
	store, err := meta.OpenSQLite(filepath.Join(t.TempDir(), "nn.db"), false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
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
	n, err := New(Config{Cluster: "test", Blocksize: 64 << 10, Store: store, UserAllocLimit: userAllocLimit,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}
