package meta

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
)

// bigCreate is the change of one transaction creating files files in
// directory 2: every create writes the new file and the directory (its
// mtime), so the directory is named files times.
func bigCreate(files int) *Change {
	c := &Change{}
	for i := 0; i < files; i++ {
		c.PutInodes = append(c.PutInodes,
			Inode{Ino: 100 + uint64(i), Type: TypeFile, Mode: 0o644, User: "u", Group: "g", Size: int64(i), Nlink: 1},
			Inode{Ino: 2, Type: TypeDir, Mode: 0o755, User: "u", Group: "g", Nlink: 2, Mtime: int64(i)})
		c.PutEntries = append(c.PutEntries, Entry{EntryKey{2, fmt.Sprintf("f%d", i)}, 100 + uint64(i)})
	}
	return c
}

func totalChanges(t testing.TB, s *SQLite) int64 {
	t.Helper()
	var n int64
	if err := s.db.QueryRow(`SELECT total_changes()`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestApplyManyInodesLinear: a batch whose changes name 80,000 inodes
// (one transaction creating 40,000 files, each create also writing the
// directory) writes every inode once, in its last state, and finding those
// last states costs work linear in the number of inodes named (it was
// quadratic: 11 s for such a commit, every other commit waiting).
func TestApplyManyInodesLinear(t *testing.T) {
	const files = 40000
	s, err := OpenSQLite(filepath.Join(t.TempDir(), "m.db"), false)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Apply(context.Background(), []*Change{{PutInodes: []Inode{{Ino: 2, Type: TypeDir, Mode: 0o755, Nlink: 2}}, PutEntries: []Entry{{EntryKey{1, "d"}, 2}}}}); err != nil {
		t.Fatal(err)
	}
	big := bigCreate(files)
	later := &Change{
		PutInodes: []Inode{{Ino: 100, Type: TypeFile, Mode: 0o600, User: "u", Group: "g", Size: 999999, Nlink: 1}},
		DelInodes: []uint64{101},
	}
	named := len(big.PutInodes) + len(later.PutInodes) + len(later.DelInodes)
	probes := 0
	testHookProbe = func() { probes++ }
	defer func() { testHookProbe = nil }()
	before := totalChanges(t, s)
	if err := s.Apply(context.Background(), []*Change{big, later}); err != nil {
		t.Fatal(err)
	}
	testHookProbe = nil
	// Rows changed: each distinct inode written once (the directory, and
	// every file but the one a later change deletes), plus the entries;
	// deleting the never-written inode 101 changes nothing.
	if got, want := totalChanges(t, s)-before, int64(1+files-1+files); got != want {
		t.Errorf("%d rows changed, want %d: some inode was written more than once", got, want)
	}
	if probes > 2*named {
		t.Errorf("finding the last state of %d inode mentions took %d steps: not linear", named, probes)
	}
	snap, err := s.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := map[uint64]Inode{}
	for _, a := range snap.Inodes {
		got[a.Ino] = a
	}
	if d := got[2]; d.Mtime != files-1 {
		t.Errorf("directory mtime %d, want the last one written (%d)", d.Mtime, files-1)
	}
	if f := got[100]; f.Size != 999999 || f.Mode != 0o600 {
		t.Errorf("inode 100 = %+v, want the later change's state", f)
	}
	if _, ok := got[101]; ok {
		t.Error("inode 101, deleted by a later change of the batch, was written")
	}
	if f := got[102]; f.Size != 2 {
		t.Errorf("inode 102 size %d, want 2", f.Size)
	}
	if len(got) != 1+1+files-1 {
		t.Errorf("%d inodes, want %d", len(got), 1+1+files-1)
	}
}

// TestApplyPutThenDeleteInOneChange: an inode written and deleted by the
// same change ends deleted; one deleted and then written again by a later
// change ends written.
func TestApplyPutThenDeleteInOneChange(t *testing.T) {
	s, err := OpenSQLite(filepath.Join(t.TempDir(), "m.db"), false)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	err = s.Apply(context.Background(), []*Change{
		{PutInodes: []Inode{{Ino: 7, Type: TypeFile, Nlink: 0}, {Ino: 8, Type: TypeFile, Nlink: 1, Size: 1}}, DelInodes: []uint64{7}},
		{DelInodes: []uint64{8}},
		{PutInodes: []Inode{{Ino: 8, Type: TypeFile, Nlink: 1, Size: 2}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	snap, err := s.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var sizes = map[uint64]int64{}
	for _, a := range snap.Inodes {
		sizes[a.Ino] = a.Size
	}
	if _, ok := sizes[7]; ok {
		t.Error("inode 7 written and deleted in one change survived")
	}
	if sizes[8] != 2 {
		t.Errorf("inode 8: %v, want size 2", sizes)
	}
}

// BenchmarkApply80000Inodes applies one transaction creating 40,000 files
// (80,000 inode writes before deduplication).
func BenchmarkApply80000Inodes(b *testing.B) {
	s, err := OpenSQLite(filepath.Join(b.TempDir(), "m.db"), true)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	c := bigCreate(40000)
	for b.Loop() {
		if err := s.Apply(context.Background(), []*Change{c}); err != nil {
			b.Fatal(err)
		}
	}
}
