package namenode

import (
	"testing"

	"github.com/plasmafs/plasma/internal/meta"
	"github.com/plasmafs/plasma/internal/wire"
)

// TestDurableTypes: every protocol file type has its own durable value and
// comes back from it, and the conversions keep every stored attribute.
func TestDurableTypes(t *testing.T) {
	seen := map[meta.InodeType]wire.FileType{}
	for ft := wire.TypeFile; ft <= wire.TypeBlockDevice; ft++ {
		st := storeType(ft)
		if st == 0 {
			t.Errorf("%s has no durable value", ft)
		}
		if other, dup := seen[st]; dup {
			t.Errorf("%s and %s share durable value %d", ft, other, st)
		}
		seen[st] = ft
		if back := wireType(st); back != ft {
			t.Errorf("%s stored as %d reads back as %s", ft, st, back)
		}
	}
	a := wire.Attr{Ino: 9, Type: wire.TypeSymlink, Mode: 0o1777, User: "u", Group: "g", Size: 5, Nlink: 2,
		Mtime: 3, Ctime: 4, Rep: 2, Seq: 7, Target: "t"}
	s := storeInode(&a)
	if got := wireAttr(&s); got != a {
		t.Errorf("attributes %+v come back as %+v", a, got)
	}
	xs := []wire.Extent{{Index: 1, Count: 2, Replicas: []wire.Run{{Node: 3, Start: 4}}, CRC: []uint32{5, 6}, Gen: 7,
		Tickets: [][]byte{[]byte("not stored")}}}
	back := wireExtents(storeExtents(xs))
	if len(back) != 1 || back[0].Index != 1 || back[0].Count != 2 || back[0].Replicas[0] != (wire.Run{Node: 3, Start: 4}) ||
		len(back[0].CRC) != 2 || back[0].Gen != 7 || back[0].Tickets != nil {
		t.Errorf("extents %+v come back as %+v", xs, back)
	}
}
