package powercut

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// Deferred data syncs are the default: an async commit leaves its data
// unsynced on the datanodes, and the namenode has them sync at the
// durability point (internal/namenode/datasync.go). A datanode that
// cannot be synced then has its unsynced replicas struck from the files
// (datasyncstrike.go) instead of stopping the namenode.

// replicasOn returns, of path's blocks, those with a replica on addr, and
// the fewest replicas a block has.
func replicasOn(t *testing.T, cl *client.Client, path, addr string) (on, fewest int) {
	t.Helper()
	ctx := context.Background()
	tx := cl.Begin()
	defer tx.Abort(ctx)
	fi, err := tx.Lookup(ctx, path)
	testkit.MustOK(t, "stat "+path, err)
	xs, err := tx.Blocks(ctx, fi.Ino)
	testkit.MustOK(t, "blocks of "+path, err)
	fewest = -1
	for _, x := range xs {
		for _, r := range x.Replicas {
			if r.Addr == addr {
				on++
			}
		}
		if fewest < 0 || len(x.Replicas) < fewest {
			fewest = len(x.Replicas)
		}
	}
	return on, fewest
}

// TestDeferredSyncKilledDatanodeStruckNamenodeRuns: files committed
// asynchronously with their data unsynced on both datanodes; one datanode
// is killed (kill -9); the Sync that makes the commits durable succeeds,
// the namenode keeps running, every file reads back byte-exact from the
// surviving replica and lists none on the killed datanode, fsck reports
// the under-replication; later commits and syncs succeed; a datanode
// added heals the files (re-replication); a power cut after that keeps
// every file. Fails if the namenode stops at a failed datanode sync
// instead of striking its replicas (or fsyncs the log without striking
// them: the files would list the killed datanode's replicas).
func TestDeferredSyncKilledDatanodeStruckNamenodeRuns(t *testing.T) {
	// Only Sync makes anything durable; -dead-after short so the killed
	// datanode counts as gone for re-replication at once.
	c := clustertest.StartPowerCut(t, clustertest.Options{NamenodeArgs: []string{"-sync-interval", "1h", "-sync-commits", "1000000", "-dead-after", "1s"}})
	ctx := context.Background()
	cl := c.Client(client.Config{}) // deferral is the default
	defer func() { cl.Close() }()
	files := map[string][]byte{}
	for i := 0; i < 30; i++ {
		p := fmt.Sprintf("/before%02d", i)
		files[p] = smallFile(t, i+3000)
		writeDeferred(t, cl, p, files[p])
	}
	killed := c.DNs[0]
	c.Kill(killed)
	c.WaitLive(1)

	testkit.MustOK(t, "Sync after a datanode holding unsynced data of async commits was killed", cl.Sync(ctx))
	if !c.NN.Running() {
		t.Fatalf("the namenode stopped after a datanode failed its sync:\n%s", c.ReadLog(c.NN))
	}
	for p, want := range files {
		if on, fewest := replicasOn(t, cl, p, killed.Addr); on > 0 || fewest != 1 {
			t.Fatalf("%s: %d blocks keep a replica on the killed datanode, fewest replicas %d (want none there, 1 left)", p, on, fewest)
		}
		if got := testkit.ReadFile(t, cl, p); !bytes.Equal(got, want) {
			t.Fatalf("%s reads back wrong from the surviving replica (%d bytes, want %d)", p, len(got), len(want))
		}
	}
	rep, err := cl.Fsck(ctx)
	testkit.MustOK(t, "fsck", err)
	if under := strings.Join(rep.Problems, "\n"); !strings.Contains(under, "/before00: blocks 0-0 have 1 of 2 replicas") {
		t.Fatalf("fsck does not report the struck files under-replicated:\n%s", under)
	}

	// A new datanode: later commits (async and durable) and syncs go on,
	// and re-replication restores every file.
	c.AddDatanode()
	c.WaitLive(2)
	for i := 0; i < 10; i++ {
		p := fmt.Sprintf("/after%02d", i)
		files[p] = smallFile(t, i+4000)
		writeDeferred(t, cl, p, files[p])
	}
	files["/durable"] = smallFile(t, 5000)
	testkit.WriteFile(t, cl, "/durable", files["/durable"], 2)
	testkit.MustOK(t, "Sync after the later commits", cl.Sync(ctx))
	testkit.AwaitCond(t, 2*time.Minute, "re-replication restores 2 replicas of every file, none on the killed datanode, and fsck is clean", func() bool {
		for p := range files {
			if on, fewest := replicasOn(t, cl, p, killed.Addr); on > 0 || fewest != 2 {
				return false
			}
		}
		rep, err := cl.Fsck(ctx)
		return err == nil && len(rep.Problems) == 0
	})
	testkit.MustOK(t, "Sync after re-replication", cl.Sync(ctx))

	// Everything was acknowledged durable: a power cut keeps it all (the
	// killed datanode comes back too, with its unsynced writes lost).
	cl.Close()
	c.PowerCut()
	cl = c.Client(client.Config{})
	for p, want := range files {
		if got := testkit.ReadFile(t, cl, p); !bytes.Equal(got, want) {
			t.Fatalf("%s reads back wrong after the power cut (%d bytes, want %d)", p, len(got), len(want))
		}
		if on, _ := replicasOn(t, cl, p, killed.Addr); on > 0 {
			t.Fatalf("%s lists a replica on the datanode whose unsynced writes the power cut lost", p)
		}
	}
	rep, err = cl.Fsck(ctx)
	testkit.MustOK(t, "fsck after the power cut", err)
	if len(rep.Problems) > 0 {
		t.Fatalf("fsck after the power cut: %v", rep.Problems)
	}
}
