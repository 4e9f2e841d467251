// Package metatest is the conformance suite every metadata store runs:
// what the namenode relies on of meta.Store, checked through the
// interface alone, so a second engine (PostgreSQL) is held to what SQLite
// does. An engine's test calls Run with a function that opens a new, empty
// store (a new namespace), and one that reopens it.
package metatest

import (
	"context"
	"reflect"
	"testing"

	"github.com/plasmafs/plasma/internal/meta"
)

// Engine opens stores for the suite.
type Engine struct {
	// New opens a new, empty store; Reopen closes s and opens the same
	// store again (what a namenode restart sees).
	New    func(t *testing.T) meta.Store
	Reopen func(t *testing.T, s meta.Store) meta.Store
}

// Run runs the suite.
func Run(t *testing.T, e Engine) {
	t.Run("EmptyHoldsRoot", func(t *testing.T) { emptyHoldsRoot(t, e) })
	t.Run("ApplyAndReload", func(t *testing.T) { applyAndReload(t, e) })
	t.Run("LastStateWinsInABatch", func(t *testing.T) { lastStateWins(t, e) })
	t.Run("DeletesAndReplaces", func(t *testing.T) { deletes(t, e) })
	t.Run("CountersOnlyGrow", func(t *testing.T) { counters(t, e) })
	t.Run("ReplayIsIdempotent", func(t *testing.T) { idempotent(t, e) })
	t.Run("DrainsAndRemovals", func(t *testing.T) { drainsAndRemovals(t, e) })
}

func load(t *testing.T, s meta.Store) *meta.Snapshot {
	t.Helper()
	snap, err := s.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

func apply(t *testing.T, s meta.Store, cs ...*meta.Change) {
	t.Helper()
	if err := s.Apply(context.Background(), cs); err != nil {
		t.Fatal(err)
	}
	if sy, ok := s.(meta.Syncer); ok {
		if err := sy.Sync(); err != nil {
			t.Fatal(err)
		}
	}
}

func emptyHoldsRoot(t *testing.T, e Engine) {
	s := e.New(t)
	defer s.Close()
	snap := load(t, s)
	if len(snap.Inodes) != 1 || snap.Inodes[0].Ino != 1 || snap.Inodes[0].Type != meta.TypeDir {
		t.Fatalf("a new store holds %+v, want only the root directory", snap.Inodes)
	}
	if len(snap.Entries) != 0 || len(snap.Blocks) != 0 || len(snap.Datanodes) != 0 {
		t.Fatalf("a new store holds entries, blocks or datanodes: %+v", snap)
	}
}

func file(ino uint64, size int64) meta.Inode {
	return meta.Inode{Ino: ino, Type: meta.TypeFile, Mode: 0o644, User: "u", Group: "g", Size: size, Nlink: 1, Mtime: 5, Ctime: 6, Rep: 2, Seq: 3}
}

func extent(idx uint64, n uint32, node uint32, start uint64) meta.Extent {
	x := meta.Extent{Index: idx, Count: n, Replicas: []meta.Run{{Node: node, Start: start}}}
	for i := uint32(0); i < n; i++ {
		x.CRC = append(x.CRC, uint32(idx)*1000+i)
	}
	return x
}

func applyAndReload(t *testing.T, e Engine) {
	s := e.New(t)
	f := file(10, 3<<20)
	sym := meta.Inode{Ino: 11, Type: meta.TypeSymlink, Mode: 0o777, User: "u", Group: "g", Nlink: 1, Target: "/x/y", Size: 4}
	xs := []meta.Extent{extent(0, 2, 1, 100), extent(2, 1, 2, 7)}
	xs[1].Replicas = append(xs[1].Replicas, meta.Run{Node: 1, Start: 300})
	apply(t, s, &meta.Change{
		PutInodes:  []meta.Inode{f, sym},
		PutEntries: []meta.Entry{{EntryKey: meta.EntryKey{Parent: 1, Name: "f"}, Ino: 10}, {EntryKey: meta.EntryKey{Parent: 1, Name: "s"}, Ino: 11}},
		Blocks:     map[uint64][]meta.Extent{10: xs},
		PutNodes:   []meta.Datanode{{ID: 1, Identity: "a", Blocks: 1000, Enabled: true}, {ID: 2, Identity: "b", Blocks: 500}},
		Touch:      map[uint64]int64{1: 1 << 62},
	})
	s = e.Reopen(t, s)
	defer s.Close()
	snap := load(t, s)
	got := map[uint64]meta.Inode{}
	for _, a := range snap.Inodes {
		got[a.Ino] = a
	}
	if !reflect.DeepEqual(got[10], f) || !reflect.DeepEqual(got[11], sym) {
		t.Fatalf("inodes after reopen: %+v / %+v", got[10], got[11])
	}
	if got[1].Mtime != 1<<62 {
		t.Fatalf("root mtime %d, want the touch %d", got[1].Mtime, int64(1<<62))
	}
	if len(snap.Entries) != 2 {
		t.Fatalf("entries %+v", snap.Entries)
	}
	if !reflect.DeepEqual(snap.Blocks[10], xs) {
		t.Fatalf("blocks %+v, want %+v", snap.Blocks[10], xs)
	}
	if len(snap.Datanodes) != 2 {
		t.Fatalf("datanodes %+v", snap.Datanodes)
	}
}

func lastStateWins(t *testing.T, e Engine) {
	s := e.New(t)
	defer s.Close()
	a, b := file(20, 1), file(20, 2)
	apply(t, s, &meta.Change{PutInodes: []meta.Inode{a}}, &meta.Change{PutInodes: []meta.Inode{b}},
		&meta.Change{PutInodes: []meta.Inode{file(21, 5), file(21, 6)}})
	snap := load(t, s)
	for _, in := range snap.Inodes {
		if in.Ino == 20 && in.Size != 2 || in.Ino == 21 && in.Size != 6 {
			t.Fatalf("inode %d size %d: not the last state of the batch", in.Ino, in.Size)
		}
	}
	// A touch never lowers an mtime.
	apply(t, s, &meta.Change{Touch: map[uint64]int64{1: 1<<62 + 100}}, &meta.Change{Touch: map[uint64]int64{1: 1<<62 + 50}})
	for _, in := range load(t, s).Inodes {
		if in.Ino == 1 && in.Mtime != 1<<62+100 {
			t.Fatalf("root mtime %d, want the larger touch", in.Mtime)
		}
	}
}

func deletes(t *testing.T, e Engine) {
	s := e.New(t)
	defer s.Close()
	apply(t, s, &meta.Change{
		PutInodes:  []meta.Inode{file(30, 10), file(31, 10)},
		PutEntries: []meta.Entry{{EntryKey: meta.EntryKey{Parent: 1, Name: "x"}, Ino: 30}},
		Blocks:     map[uint64][]meta.Extent{30: {extent(0, 1, 1, 1)}, 31: {extent(0, 1, 1, 2)}},
	})
	apply(t, s, &meta.Change{
		DelInodes:  []uint64{30},
		DelEntries: []meta.EntryKey{{Parent: 1, Name: "x"}},
		PutEntries: []meta.Entry{{EntryKey: meta.EntryKey{Parent: 1, Name: "y"}, Ino: 31}},
		Blocks:     map[uint64][]meta.Extent{31: {extent(0, 1, 1, 9), extent(1, 1, 1, 10)}},
	})
	snap := load(t, s)
	for _, in := range snap.Inodes {
		if in.Ino == 30 {
			t.Fatal("deleted inode still there")
		}
	}
	if _, ok := snap.Blocks[30]; ok {
		t.Fatal("a deleted inode's blocks are still there")
	}
	if len(snap.Blocks[31]) != 2 || snap.Blocks[31][0].Replicas[0].Start != 9 {
		t.Fatalf("replaced block list: %+v", snap.Blocks[31])
	}
	if len(snap.Entries) != 1 || snap.Entries[0].Name != "y" {
		t.Fatalf("entries %+v", snap.Entries)
	}
}

func counters(t *testing.T, e Engine) {
	s := e.New(t)
	apply(t, s, &meta.Change{InoLimit: 5000, LogSeq: 40})
	apply(t, s, &meta.Change{InoLimit: 3000, LogSeq: 30}) // never lowered
	s = e.Reopen(t, s)
	defer s.Close()
	snap := load(t, s)
	if snap.InoLimit < 5000 || snap.LogSeq != 40 {
		t.Fatalf("inode limit %d (want ≥ 5000), log position %d (want 40)", snap.InoLimit, snap.LogSeq)
	}
}

func idempotent(t *testing.T, e Engine) {
	s := e.New(t)
	defer s.Close()
	c := &meta.Change{
		PutInodes:  []meta.Inode{file(40, 7)},
		PutEntries: []meta.Entry{{EntryKey: meta.EntryKey{Parent: 1, Name: "z"}, Ino: 40}},
		Blocks:     map[uint64][]meta.Extent{40: {extent(0, 1, 1, 5)}},
	}
	apply(t, s, c)
	before := load(t, s)
	// A commit-log replay applies a batch the store may already hold.
	apply(t, s, c)
	after := load(t, s)
	if !reflect.DeepEqual(before.Blocks, after.Blocks) || len(before.Entries) != len(after.Entries) || len(before.Inodes) != len(after.Inodes) {
		t.Fatal("applying the same change twice changed the store")
	}
	// Encoded for the log and decoded, a change applies the same.
	back, err := meta.DecodeChanges(meta.EncodeChanges([]*meta.Change{c}))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back[0].PutInodes, c.PutInodes) || !reflect.DeepEqual(back[0].Blocks, c.Blocks) || !reflect.DeepEqual(back[0].PutEntries, c.PutEntries) {
		t.Fatalf("log encoding changed the change: %+v", back[0])
	}
}
