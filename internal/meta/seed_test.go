package meta

import (
	"context"
	"path/filepath"
	"testing"
)

// A store seeded from another's copy (a namenode group's new member)
// holds what the copy holds, the copy's namespace, and exactly the log
// position the copy was taken at, lower than the one it had or not.
func TestReseedTakesTheCopyAndItsPosition(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	src, err := OpenSQLiteWith(filepath.Join(dir, "leader.db"), SQLiteOptions{Format: true})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if err := src.Apply(ctx, []*Change{{PutInodes: []Inode{{Ino: 2, Type: TypeDir, Nlink: 2}}, PutEntries: []Entry{{EntryKey{1, "d"}, 2}}, LogSeq: 40}}); err != nil {
		t.Fatal(err)
	}
	cp := filepath.Join(dir, "seed.db")
	seq, err := src.BackupAt(cp)
	if err != nil || seq != 40 {
		t.Fatalf("BackupAt: position %d, %v; want 40", seq, err)
	}
	dst, err := OpenSQLiteWith(filepath.Join(dir, "member.db"), SQLiteOptions{Format: true})
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	if err := dst.Apply(ctx, []*Change{{PutEntries: []Entry{{EntryKey{1, "stale"}, 1}}, LogSeq: 99}}); err != nil {
		t.Fatal(err)
	}
	copyStore, err := OpenSQLiteWith(cp, SQLiteOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer copyStore.Close()
	if err := dst.Reseed(ctx, copyStore, seq); err != nil {
		t.Fatal(err)
	}
	if dst.Namespace() != src.Namespace() {
		t.Fatalf("namespace %s after the seed, want the copy's %s", dst.Namespace(), src.Namespace())
	}
	snap, err := dst.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if snap.LogSeq != 40 || len(snap.Entries) != 1 || snap.Entries[0].Name != "d" {
		t.Fatalf("after the seed: position %d, entries %+v; want 40 and only d", snap.LogSeq, snap.Entries)
	}
}
