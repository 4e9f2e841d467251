package mount

import (
	"bytes"
	"os"
	"testing"

	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestOverwriteInPlaceWaitsForFreedSpace: a 6 MiB file (replication 2)
// rewritten in place through the mount, eight times in a row, on three
// sparse datanodes of 16 MiB. Each rewrite places its new blocks by the
// old ones' datanodes, which fill up with the versions being freed
// (released a few heartbeats later) while the third has room: the
// allocation must wait for the freed space, not fail. Before, the
// namenode answered the failed placement "no space" although the cluster
// had room and blocks on their way back, and every rewrite but the first
// few failed with ENOSPC ('dd conv=notrunc' over a file, an 800 MB
// cluster 3% full).
func TestOverwriteInPlaceWaitsForFreedSpace(t *testing.T) {
	testkit.NeedFUSE(t)
	c := clustertest.Start(t, clustertest.Options{Datanodes: 3, Size: 16 << 20, Sparse: true,
		DatanodeArgs: []string{"-heartbeat", "1s"}})
	m := testkit.StartMount(t, c, "rep=2")
	var data []byte
	for i := 0; i < 8; i++ {
		data = testkit.RandomBytes(t, 6<<20)
		flags := os.O_WRONLY
		if i == 0 {
			flags |= os.O_CREATE
		}
		f, err := os.OpenFile(m.Path("f"), flags, 0o644)
		testkit.MustOK(t, "open f", err)
		_, err = f.WriteAt(data, 0)
		testkit.MustOK(t, "rewrite f in place", err)
		testkit.MustOK(t, "close f after rewriting it", f.Close())
	}
	got, err := os.ReadFile(m.Path("f"))
	testkit.MustOK(t, "read f", err)
	if !bytes.Equal(got, data) {
		t.Fatalf("f reads %d bytes, not the %d of its last rewrite", len(got), len(data))
	}
}
