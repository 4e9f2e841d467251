package powercut

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestDeferredDataSyncRestartedDatanodeDroppedAtCommit: a transaction
// writes a file to both datanodes without their sync; one datanode
// restarts (its unsynced writes would be lost to a power cut) before the
// async commit, which commits the file without that replica, as a
// client's failed sync would; the Sync after it succeeds and the file
// reads back. Fails if the namenode does not compare the datanode's
// registration with the one that took the writes.
func TestDeferredDataSyncRestartedDatanodeDroppedAtCommit(t *testing.T) {
	c, cl := startUnsynced(t)
	ctx := context.Background()
	data := testkit.RandomBytes(t, 5000)
	tx, f := writeInTxn(t, cl, "/a", 2, data)
	testkit.MustOK(t, "flush", f.Flush(ctx))
	c.Kill(c.DNs[0])
	c.WaitLive(1)
	c.StartDatanode(c.DNs[0])
	c.WaitLive(2)
	testkit.MustOK(t, "async commit after a datanode restart", tx.CommitAsync(ctx))
	testkit.MustOK(t, "sync", cl.Sync(ctx))
	check := cl.Begin()
	defer check.Abort(ctx)
	fi, err := check.Lookup(ctx, "/a")
	testkit.MustOK(t, "stat", err)
	xs, err := check.Blocks(ctx, fi.Ino)
	testkit.MustOK(t, "blocks", err)
	for _, x := range xs {
		for _, r := range x.Replicas {
			if r.Addr == c.DNs[0].Addr {
				t.Fatalf("/a keeps its replica on the datanode that restarted after the unsynced write: %+v", xs)
			}
		}
	}
	if got := testkit.ReadFile(t, cl, "/a"); !bytes.Equal(got, data) {
		t.Fatal("/a reads back wrong")
	}
}

// TestDeferredDataSyncLostDatanodeFailsSync: an async commit leaves its
// data unsynced on both replicas' datanodes (replication 2), which are
// killed; the Sync that would make the commit durable fails and the
// namenode stops rather than fsync its log over data no datanode holds
// (with one replica left it would strike the lost one and go on:
// deferred_sync_failed_datanode_struck_test.go). Fails if the namenode
// does not sync the datanodes before its log, or strikes a block's last
// replica.
func TestDeferredDataSyncLostDatanodeFailsSync(t *testing.T) {
	c, cl := startUnsynced(t)
	ctx := context.Background()
	tx, _ := writeInTxn(t, cl, "/a", 2, testkit.RandomBytes(t, 5000))
	testkit.MustOK(t, "async commit", tx.CommitAsync(ctx))
	for _, dn := range c.DNs {
		c.Kill(dn)
	}
	c.WaitLive(0)
	if err := cl.Sync(ctx); err == nil {
		t.Fatal("Sync succeeded though every datanode holding the commit's unsynced data was gone")
	}
	if code := c.Wait(c.NN); code == 0 {
		t.Fatal("the namenode exited with status 0 after failing to sync a datanode")
	}
	if log := c.ReadLog(c.NN); !strings.Contains(log, "whose every replica failed its sync") || !strings.Contains(log, "unsynced data of async commits") {
		t.Fatalf("the namenode's log does not say which data it could not make durable and why:\n%s", log)
	}
}

// TestDeferredDataSyncSingleReplicaSyncedAtCommit: a file of replication
// 1 committed async has its datanode synced before the commit (a failed
// sync at the namenode's durability point would leave no replica to
// strike it to, and the namenode would have to stop); so a kill -9 of
// that datanode afterwards costs nothing: the Sync succeeds, the namenode
// keeps running and commits, and the file reads back once the datanode
// is back. Fails if the commit defers a single replica's sync.
func TestDeferredDataSyncSingleReplicaSyncedAtCommit(t *testing.T) {
	c, cl := startUnsynced(t)
	ctx := context.Background()
	data := testkit.RandomBytes(t, 5000)
	tx, _ := writeInTxn(t, cl, "/a", 1, data)
	testkit.MustOK(t, "async commit", tx.CommitAsync(ctx))
	for _, dn := range c.DNs {
		c.Kill(dn)
	}
	c.WaitLive(0)
	testkit.MustOK(t, "sync after the datanodes' kill -9", cl.Sync(ctx))
	testkit.MustOK(t, "a commit after it", cl.Txn(ctx, func(ctx context.Context, tx *client.Txn) error { _, err := tx.Mkdir(ctx, "/d", 0o755); return err }))
	for _, dn := range c.DNs {
		c.StartDatanode(dn)
	}
	c.WaitLive(len(c.DNs))
	if got := testkit.ReadFile(t, cl, "/a"); !bytes.Equal(got, data) {
		t.Fatal("/a reads back wrong")
	}
}

// startUnsynced starts a cluster whose namenode makes its log durable only
// when asked (Sync), so that async commits stay not durable until then,
// and a client of it (closed with the test).
func startUnsynced(t *testing.T) (*clustertest.Procs, *client.Client) {
	t.Helper()
	c := clustertest.Start(t, clustertest.Options{NamenodeArgs: []string{"-sync-interval", "1h", "-sync-commits", "1000000"}})
	cl := c.Client(client.Config{})
	t.Cleanup(func() { cl.Close() })
	return c, cl
}

// writeInTxn creates path with rep replicas in a new transaction of cl and
// writes data to it; the transaction is left open.
func writeInTxn(t *testing.T, cl *client.Client, path string, rep int, data []byte) (*client.Txn, *client.File) {
	t.Helper()
	tx := cl.Begin()
	f, err := tx.CreateFile(context.Background(), path, client.CreateOptions{Rep: rep})
	testkit.MustOK(t, "create "+path, err)
	_, err = f.Write(data)
	testkit.MustOK(t, "write "+path, err)
	return tx, f
}
