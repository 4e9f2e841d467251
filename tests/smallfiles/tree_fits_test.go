package smallfiles

import (
	"context"
	"testing"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestSmallFileTreeFitsNearItsSize: a tree of 20,000 source-like files
// (most 1-30 KiB), written through the API at replication 2 on two
// datanodes of the production blocksize (1 MiB) whose volumes hold 1.4
// times the tree's bytes each, fits, reads back byte-exact, and fsck is
// clean; each datanode then reports using about what the tree holds in
// whole pages. On volumes of fixed slots (one 1 MiB block per file) the
// write runs out of space after a few hundred files.
func TestSmallFileTreeFitsNearItsSize(t *testing.T) {
	tr := newTree("/src", 20000, 200, 1)
	size := tr.bytes() * 14 / 10
	c := clustertest.Start(t, clustertest.Options{Datanodes: 2, Blocksize: 1 << 20, Size: size, Sparse: true})
	cl := c.Client(client.Config{})
	defer cl.Close()
	ctx := context.Background()
	n, err := tr.write(ctx, cl, 2, 4, 25)
	if err != nil {
		t.Fatalf("after %d of %d files (%d bytes, volumes of %d bytes): %v", n, len(tr.paths), tr.bytes(), size, err)
	}
	tr.check(t, ctx, cl, 4)
	testkit.FsckClean(t, cl)

	var pages int64
	for _, s := range tr.sizes {
		pages += pageRounded(s)
	}
	nodes, err := cl.Datanodes(ctx)
	testkit.MustOK(t, "datanodes", err)
	for _, dn := range nodes {
		used := int64(dn.Used) * int64(dn.Blocksize)
		t.Logf("datanode %s: %d bytes used for a tree of %d bytes (%d in whole pages): %.2fx", dn.Identity, used, tr.bytes(), pages, float64(used)/float64(tr.bytes()))
		// Whole blocks of the bytes: at most one more than the pages.
		if used < pages || used > pages+int64(dn.Blocksize) {
			t.Errorf("datanode %s reports %d bytes used, want the tree's %d bytes in whole pages (%d)", dn.Identity, used, tr.bytes(), pages)
		}
	}
	for _, p := range c.DNs {
		if got, most := diskBytes(t, p.Dir+"/data"), pages+volumeEntries(t, p.Dir)+(1<<20); got > most {
			t.Errorf("volume %s takes %d bytes of disk, want at most %d (the tree's pages and the slots' entries)", p.Dir, got, most)
		}
	}
}
