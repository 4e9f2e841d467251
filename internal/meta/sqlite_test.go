package meta

import (
	"context"
	"path/filepath"
	"testing"
)

func TestSQLiteApplyLoadAcrossReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.db")
	s, err := OpenSQLite(path, false)
	if err != nil {
		t.Fatal(err)
	}
	ext := []Extent{{Index: 0, Count: 2, Replicas: []Run{{Node: 1, Start: 10}, {Node: 2, Start: 20}}, CRC: []uint32{7, 8}}}
	err = s.Apply(context.Background(), []*Change{
		{PutNodes: []Datanode{{ID: 1, Identity: "a", Blocks: 100, Enabled: true}, {ID: 2, Identity: "b", Blocks: 100, Enabled: true}}},
		{PutInodes: []Inode{{Ino: 5, Type: TypeFile, Mode: 0o600, User: "u", Group: "g", Size: 3, Nlink: 1, Rep: 2}},
			PutEntries: []Entry{{EntryKey{1, "f"}, 5}}, Blocks: map[uint64][]Extent{5: ext}, InoLimit: 100},
		{PutInodes: []Inode{{Ino: 6, Type: TypeDir, Mode: 0o755, Nlink: 2}}, PutEntries: []Entry{{EntryKey{1, "d"}, 6}}},
		{DelInodes: []uint64{6}, DelEntries: []EntryKey{{1, "d"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = OpenSQLite(path, false)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	snap, err := s.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Inodes) != 2 || len(snap.Entries) != 1 || snap.Entries[0].Name != "f" || len(snap.Datanodes) != 2 {
		t.Fatalf("snapshot: %+v", snap)
	}
	if snap.InoLimit != 100 {
		t.Fatalf("inode limit %d", snap.InoLimit)
	}
	got := snap.Blocks[5]
	if len(got) != 1 || got[0].Replicas[1].Start != 20 || got[0].CRC[1] != 8 {
		t.Fatalf("blocks %+v", got)
	}
}
