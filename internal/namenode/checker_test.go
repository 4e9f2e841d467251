package namenode

import (
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/plasmafs/plasma/internal/meta"
	"github.com/plasmafs/plasma/internal/wire"
)

// testChecker: / holds file f (ino 3, one block on datanode dn1 at 7,
// marked used) and directory d (ino 2) with file g (ino 4, no blocks).
func testChecker(t *testing.T) (*checker, *Txn) {
	ns := newNamespace(newLockTable())
	ns.inodes[rootIno] = &inode{attr: wire.Attr{Ino: rootIno, Type: wire.TypeDir, Nlink: 3}, entries: map[string]uint64{"d": 2, "f": 3}, parent: rootIno}
	ns.inodes[2] = &inode{attr: wire.Attr{Ino: 2, Type: wire.TypeDir, Nlink: 2}, entries: map[string]uint64{"g": 4}, parent: rootIno}
	ns.inodes[3] = &inode{attr: wire.Attr{Ino: 3, Type: wire.TypeFile, Nlink: 1, Size: 10, Rep: 1},
		blocks: []wire.Extent{{Index: 0, Count: 1, Replicas: []wire.Run{{Node: 1, Start: 7}}, CRC: []uint32{0}}}}
	ns.inodes[4] = &inode{attr: wire.Attr{Ino: 4, Type: wire.TypeFile, Nlink: 1, Rep: 1}}
	nodes := newNodeRegistry()
	dn := nodes.add(meta.Datanode{ID: 1, Identity: "dn1", Blocks: 100, Enabled: true})
	dn.used.set(7, 1)
	txns := newTxnTable()
	tx, err := txns.begin(&conn{}, 1, 0, "", 10)
	if err != nil {
		t.Fatal(err)
	}
	inoNext := uint64(10)
	return &checker{mu: &sync.Mutex{}, ns: ns, nodes: nodes, txns: txns, inoNext: &inoNext, blocksize: 1 << 20,
		timeout: 1 << 62, log: slog.New(slog.NewTextHandler(io.Discard, nil))}, tx
}

// scan runs a whole scan, calling between after each page, and returns
// its problems and the files whose block lists it sent.
func scan(t *testing.T, ck *checker, tx *Txn, between func()) (problems, files []string) {
	ck.mu.Lock()
	defer ck.mu.Unlock()
	q := &wire.Request{}
	for range 1000 {
		resp, err := ck.page(tx, q)
		if err != nil {
			t.Fatal(err)
		}
		problems = append(problems, resp.Problems...)
		for _, f := range resp.Files {
			files = append(files, f.Path)
		}
		if resp.Counters[1] == 1 {
			if len(ck.scans) != 0 {
				t.Fatalf("finished scan still held: %d", len(ck.scans))
			}
			return problems, files
		}
		q.Ino = resp.Counters[0]
		if between != nil {
			between()
		}
	}
	t.Fatal("scan does not end")
	return nil, nil
}

func TestCheckerClean(t *testing.T) {
	ck, tx := testChecker(t)
	problems, files := scan(t, ck, tx, nil)
	if len(problems) != 0 {
		t.Errorf("problems in a clean namespace: %q", problems)
	}
	slices.Sort(files)
	if want := []string{"/d/g", "/f"}; !slices.Equal(files, want) {
		t.Errorf("files sent %q, want %q", files, want)
	}
}

func TestCheckerFindsProblems(t *testing.T) {
	ck, tx := testChecker(t)
	ck.ns.inodes[4].attr.Nlink = 2                                                                                                 // one name
	ck.nodes.get(1).used.clear(7, 1)                                                                                               // f's block marked free
	ck.ns.inodes[3].blocks[0].Replicas = append(ck.ns.inodes[3].blocks[0].Replicas, wire.Run{Node: 9, Start: 0})                   // unknown node
	ck.ns.inodes[5] = &inode{attr: wire.Attr{Ino: 5, Type: wire.TypeDir, Nlink: 2}, entries: map[string]uint64{}, parent: rootIno} // named nowhere
	problems, _ := scan(t, ck, tx, nil)
	slices.Sort(problems)
	want := []string{
		"/d/g: link count 2 but 1 names",
		"/f: block 0 (datanode dn1 block 7) is marked free",
		"/f: blocks 0-0 are on unknown datanode 9",
	}
	if len(problems) != 4 || !slices.Equal(problems[:3], want) || !strings.Contains(problems[3], "inode 5") {
		t.Errorf("problems %q, want %q and directory inode 5 unreachable", problems, want)
	}
}

// TestCheckerCommitDuringScan: a link-count problem fixed by a commit
// during the scan (the commit noted before it is applied) is not
// reported; one no commit touched is.
func TestCheckerCommitDuringScan(t *testing.T) {
	defer func(w int) { fsckPageWork = w }(fsckPageWork)
	fsckPageWork = 2
	ck, tx := testChecker(t)
	ck.ns.inodes[4].attr.Nlink = 2
	ck.ns.inodes[3].attr.Nlink = 5
	fixed := false
	problems, _ := scan(t, ck, tx, func() {
		for _, sc := range ck.scans {
			if fixed || sc.pass != 1 || sc.next <= 4 {
				return // fixed after the pass recorded ino 4
			}
		}
		fixed = true
		ck.note(&meta.Change{PutInodes: []meta.Inode{{Ino: 4}}})
		ck.ns.inodes[4].attr.Nlink = 1
	})
	if !fixed {
		t.Fatal("the scan ended before the fix")
	}
	if want := []string{"/f: link count 5 but 1 names"}; !slices.Equal(problems, want) {
		t.Errorf("problems %q, want %q", problems, want)
	}
}
