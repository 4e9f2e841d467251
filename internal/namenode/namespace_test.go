package namenode

import (
	"maps"
	"testing"

	"github.com/plasmafs/plasma/internal/wire"
)

// testNamespace: / holds directory d (ino 2) and file f (ino 3, one
// block); d holds file g (ino 4); ino 5 is an unlinked file.
func testNamespace() *namespace {
	ns := newNamespace(newLockTable())
	dir := func(ino, parent uint64, entries map[string]uint64) *inode {
		return &inode{attr: wire.Attr{Ino: ino, Type: wire.TypeDir, Nlink: 2}, entries: entries, parent: parent}
	}
	ns.inodes[rootIno] = dir(rootIno, rootIno, map[string]uint64{"d": 2, "f": 3})
	ns.inodes[2] = dir(2, rootIno, map[string]uint64{"g": 4})
	ns.inodes[3] = &inode{attr: wire.Attr{Ino: 3, Type: wire.TypeFile, Nlink: 1, Size: 10, Seq: 1},
		blocks: []wire.Extent{{Index: 0, Count: 1, Replicas: []wire.Run{{Node: 1, Start: 7}}}}}
	ns.inodes[4] = &inode{attr: wire.Attr{Ino: 4, Type: wire.TypeFile, Nlink: 1}}
	ns.inodes[5] = &inode{attr: wire.Attr{Ino: 5, Type: wire.TypeFile}}
	return ns
}

func testTxn(id uint64) *Txn { return &Txn{key: txnKey{&conn{}, id}} }

func TestNamespaceEntryOverlay(t *testing.T) {
	ns := testNamespace()
	tx := testTxn(1)
	ns.setEntry(tx, rootIno, "new", 9)
	ns.setEntry(tx, rootIno, "f", 0) // removed
	ns.setEntry(tx, 2, "h", 8)
	if got := ns.entry(tx, rootIno, "new"); got != 9 {
		t.Errorf("tx's own new entry: %d", got)
	}
	if got := ns.entry(tx, rootIno, "f"); got != 0 {
		t.Errorf("entry tx removed: %d", got)
	}
	if got := ns.entry(nil, rootIno, "f"); got != 3 {
		t.Errorf("committed entry outside tx: %d", got)
	}
	if got := ns.entry(nil, rootIno, "new"); got != 0 {
		t.Errorf("uncommitted entry visible outside tx: %d", got)
	}
	if got, want := ns.list(tx, rootIno), map[string]uint64{"d": 2, "new": 9}; !maps.Equal(got, want) {
		t.Errorf("list / in tx = %v, want %v", got, want)
	}
	if got, want := ns.list(nil, rootIno), map[string]uint64{"d": 2, "f": 3}; !maps.Equal(got, want) {
		t.Errorf("list / outside tx = %v, want %v", got, want)
	}
	if got, want := ns.list(tx, 2), map[string]uint64{"g": 4, "h": 8}; !maps.Equal(got, want) {
		t.Errorf("list /d in tx = %v, want %v", got, want)
	}
	if !tx.touched[rootIno] || !tx.touched[2] {
		t.Errorf("changed directories not marked for mtime: %v", tx.touched)
	}
	// Listing hands out a copy: changing it changes nothing.
	ns.list(nil, rootIno)["x"] = 1
	if ns.entry(nil, rootIno, "x") != 0 {
		t.Error("list returned the committed map itself")
	}
}

func TestNamespaceAttrCopiesAndLocks(t *testing.T) {
	ns := testNamespace()
	tx, other := testTxn(1), testTxn(2)
	if ns.attr(nil, 5) != nil {
		t.Error("unlinked inode visible")
	}
	a, err := ns.mutAttr(tx, 3)
	if err != nil {
		t.Fatal(err)
	}
	a.Size = 99
	if got := ns.attr(tx, 3).Size; got != 99 {
		t.Errorf("tx sees size %d of its own copy", got)
	}
	if got := ns.attr(nil, 3).Size; got != 10 {
		t.Errorf("committed size changed to %d by a private copy", got)
	}
	if ns.inodes[3].users != 1 || !tx.used[3] {
		t.Errorf("tx not counted as a user of the inode it changes")
	}
	if _, err := ns.mutAttr(other, 3); err != errConflict {
		t.Errorf("second writer: %v, want a conflict", err)
	}
	if _, err := ns.mutAttr(tx, 42); err != errNotFound {
		t.Errorf("missing inode: %v", err)
	}
}

func TestNamespaceFirstCommitterWins(t *testing.T) {
	ns := testNamespace()
	tx := testTxn(1)
	if ns.attr(tx, 3) == nil {
		t.Fatal("file missing")
	}
	ns.fileVersion(tx, 3) // tx reads the data of version Seq 1
	ns.inodes[3].attr.Seq = 2
	if _, err := ns.mutAttr(tx, 3); err != errConflict {
		t.Errorf("writing a file changed since tx read it: %v, want a conflict", err)
	}
}

func TestNamespaceFileVersionRepeatable(t *testing.T) {
	ns := testNamespace()
	tx := testTxn(1)
	xs, size := ns.fileVersion(tx, 3)
	if len(xs) != 1 || xs[0].Replicas[0].Start != 7 || size != 10 {
		t.Fatalf("first read: %+v size %d", xs, size)
	}
	// Another transaction commits a new version.
	ns.inodes[3].blocks = []wire.Extent{{Index: 0, Count: 2, Replicas: []wire.Run{{Node: 1, Start: 20}}}}
	ns.inodes[3].attr.Size = 20
	if xs, size := ns.fileVersion(tx, 3); len(xs) != 1 || xs[0].Replicas[0].Start != 7 || size != 10 {
		t.Errorf("tx's second read: %+v size %d, want the version it read first", xs, size)
	}
	if xs, size := ns.fileVersion(nil, 3); xs[0].Replicas[0].Start != 20 || size != 20 {
		t.Errorf("outside tx: %+v size %d, want the committed version", xs, size)
	}
	// A file tx created has no blocks and its own size.
	if tx.inodes == nil {
		tx.inodes = map[uint64]*wire.Attr{}
	}
	tx.inodes[9] = &wire.Attr{Ino: 9, Type: wire.TypeFile, Size: 5}
	if xs, size := ns.fileVersion(tx, 9); xs != nil || size != 5 {
		t.Errorf("tx's new file: %+v size %d", xs, size)
	}
}

func TestNamespaceResolve(t *testing.T) {
	ns := testNamespace()
	tx := testTxn(1)
	for p, want := range map[string]uint64{"/": rootIno, "/d": 2, "/d/g": 4, "/f": 3, "/d/./g": 4} {
		if got, err := ns.resolve(nil, nil, p, true); err != nil || got != want {
			t.Errorf("resolve %s = %d, %v; want %d", p, got, err, want)
		}
	}
	if _, err := ns.resolve(nil, nil, "/f/x", true); !isCode(err, wire.ErrCodeNotDir) {
		t.Errorf("path through a file: %v", err)
	}
	if _, err := ns.resolve(nil, nil, "/nope", true); !isCode(err, wire.ErrCodeNotFound) {
		t.Errorf("missing name: %v", err)
	}
	// A directory tx moved resolves under its new parent for tx only.
	ns.setEntry(tx, rootIno, "d", 0)
	ns.setEntry(tx, 3, "moved", 2)
	tx.parents = map[uint64]uint64{2: 3}
	if got := ns.parentOf(tx, 2); got != 3 {
		t.Errorf("parent of moved dir in tx: %d", got)
	}
	if got := ns.parentOf(nil, 2); got != rootIno {
		t.Errorf("parent of moved dir outside tx: %d", got)
	}
	if _, err := ns.resolve(tx, nil, "/d/g", true); !isCode(err, wire.ErrCodeNotFound) {
		t.Errorf("old path of a directory tx moved: %v", err)
	}
	if parent, name, err := ns.resolveParent(nil, nil, "/d/g"); err != nil || parent != 2 || name != "g" {
		t.Errorf("resolveParent /d/g = %d %q %v", parent, name, err)
	}
}
