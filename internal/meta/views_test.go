package meta

import (
	"context"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/plasmafs/plasma/internal/pgtest"
)

// TestViewsAnswerForAKnownTree: the operators' views (views.go) give the
// same, right answers on both engines for a known tree.
func TestViewsAnswerForAKnownTree(t *testing.T) {
	ctx := context.Background()
	pg := pgtest.Start(t)
	engines := map[string]string{
		"sqlite":   "sqlite://" + filepath.Join(t.TempDir(), "nn.db"),
		"postgres": pg.CreateDB(t),
	}
	for name, url := range engines {
		t.Run(name, func(t *testing.T) {
			s, err := Open(ctx, url, OpenOptions{Create: true})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if err := s.Apply(ctx, []*Change{knownTree()}); err != nil {
				t.Fatal(err)
			}
			db := s.(sqlStore).sqlDB()
			ask := func(q string, want [][]any) {
				t.Helper()
				rows, err := db.QueryContext(ctx, q)
				if err != nil {
					t.Fatalf("%s: %v", q, err)
				}
				defer rows.Close()
				cols, _ := rows.Columns()
				var got [][]any
				for rows.Next() {
					vals := make([]any, len(cols))
					ptrs := make([]any, len(cols))
					for i := range vals {
						switch want[0][i].(type) {
						case string:
							ptrs[i] = new(string)
						default:
							ptrs[i] = new(int64)
						}
					}
					if err := rows.Scan(ptrs...); err != nil {
						t.Fatalf("%s: %v", q, err)
					}
					for i, p := range ptrs {
						vals[i] = reflect.ValueOf(p).Elem().Interface()
					}
					got = append(got, vals)
				}
				if err := rows.Err(); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("%s:\n got %v\nwant %v", q, got, want)
				}
			}
			ask(`SELECT path, size FROM files WHERE owner = 'alice' ORDER BY path`,
				[][]any{{"/home/alice/a.txt", int64(100)}, {"/top", int64(7)}})
			ask(`SELECT owner, files, bytes FROM usage_by_owner ORDER BY owner`,
				[][]any{{"alice", int64(2), int64(107)}, {"bob", int64(1), int64(200)}})
			ask(`SELECT path, identity FROM files_on_datanode WHERE node = 2 ORDER BY path`,
				[][]any{{"/home/alice/a.txt", "dn-b"}, {"/home/bob/b.bin", "dn-b"}})
			ask(`SELECT node, start FROM replicas WHERE ino = 5 ORDER BY idx, node`,
				[][]any{{int64(2), int64(9)}, {int64(3), int64(1<<40 + 5)}, {int64(2), int64(300)}})
			ask(`SELECT ino, path FROM paths ORDER BY path`,
				[][]any{{int64(1), "/"}, {int64(2), "/home"}, {int64(3), "/home/alice"}, {int64(4), "/home/alice/a.txt"},
					{int64(7), "/home/bob"}, {int64(5), "/home/bob/b.bin"}, {int64(6), "/top"}})
		})
	}
}

func knownTree() *Change {
	dir := func(ino uint64, owner string) Inode {
		return Inode{Ino: ino, Type: TypeDir, Mode: 0o755, User: owner, Group: owner, Nlink: 2}
	}
	file := func(ino uint64, owner string, size int64) Inode {
		return Inode{Ino: ino, Type: TypeFile, Mode: 0o644, User: owner, Group: owner, Size: size, Nlink: 1, Rep: 2}
	}
	ent := func(parent uint64, name string, ino uint64) Entry { return Entry{EntryKey{parent, name}, ino} }
	return &Change{
		PutInodes: []Inode{dir(2, "root"), dir(3, "alice"), file(4, "alice", 100), file(5, "bob", 200), file(6, "alice", 7), dir(7, "bob")},
		PutEntries: []Entry{ent(1, "home", 2), ent(2, "alice", 3), ent(3, "a.txt", 4), ent(2, "bob", 7), ent(7, "b.bin", 5),
			ent(1, "top", 6)},
		Blocks: map[uint64][]Extent{
			4: {{Index: 0, Count: 1, Replicas: []Run{{Node: 1, Start: 4}, {Node: 2, Start: 8}}, CRC: []uint32{1}}},
			5: {{Index: 0, Count: 2, Replicas: []Run{{Node: 2, Start: 9}, {Node: 3, Start: 1<<40 + 5}}, CRC: []uint32{1, 2}},
				{Index: 2, Count: 1, Replicas: []Run{{Node: 2, Start: 300}}, CRC: []uint32{3}}},
		},
		PutNodes: []Datanode{{ID: 1, Identity: "dn-a", Blocks: 1 << 20, Enabled: true}, {ID: 2, Identity: "dn-b", Blocks: 1 << 20, Enabled: true},
			{ID: 3, Identity: "dn-c", Blocks: 1 << 41, Enabled: true}},
	}
}
