package smallfiles

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestDatanodeRestartKeepsSmallFiles: after 2,000 small files on sparse
// volumes, both datanodes are killed (SIGKILL) and restarted; every file
// reads back byte-exact, fsck is clean, the datanodes report the same bytes
// used as before (recounted from their entries), and more files still fit
// and read back.
func TestDatanodeRestartKeepsSmallFiles(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Datanodes: 2, Blocksize: 1 << 20, Size: 64 << 20, Sparse: true})
	cl := c.Client(client.Config{})
	defer cl.Close()
	ctx := context.Background()
	tr := newTree("/a", 2000, 200, 3)
	if n, err := tr.write(ctx, cl, 2, 4, 20); err != nil {
		t.Fatalf("after %d files: %v", n, err)
	}
	before := settledUse(t, cl)
	for _, p := range c.DNs {
		c.Kill(p)
	}
	for _, p := range c.DNs {
		c.StartDatanode(p)
	}
	c.WaitLive(len(c.DNs))
	tr.check(t, ctx, cl, 4)
	testkit.FsckClean(t, cl)
	if after := settledUse(t, cl); !maps.Equal(after, before) {
		t.Errorf("datanodes report %v bytes used after their restart, %v before", after, before)
	}
	more := newTree("/b", 500, 100, 4)
	if n, err := more.write(ctx, cl, 2, 4, 20); err != nil {
		t.Fatalf("after the restart, after %d files: %v", n, err)
	}
	more.check(t, ctx, cl, 4)
	tr.check(t, ctx, cl, 4)
}

// settledUse returns the bytes each datanode reports used (by identity),
// once two answers in a row agree (reservations settled).
func settledUse(t *testing.T, cl *client.Client) map[string]uint64 {
	t.Helper()
	var last map[string]uint64
	deadline := time.Now().Add(30 * time.Second)
	for {
		nodes, err := cl.Datanodes(context.Background())
		testkit.MustOK(t, "datanodes", err)
		m := map[string]uint64{}
		for _, n := range nodes {
			if n.Alive {
				m[n.Identity] = n.Used * uint64(n.Blocksize)
			}
		}
		same := last != nil && len(m) == len(last) && len(m) == len(nodes)
		for k, v := range m {
			same = same && last[k] == v
		}
		if same {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("datanodes' use does not settle: %v then %v", last, m)
		}
		last = m
		time.Sleep(300 * time.Millisecond) // polling a condition, not timing
	}
}
