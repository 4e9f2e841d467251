package powercut

import (
	"context"
	"strings"
	"testing"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestDeferredDataSyncRestartedDatanodeRefusesCommit: a transaction writes
// a file to both datanodes without their sync; one datanode restarts (its
// unsynced writes would be lost to a power cut) before the async commit,
// which is refused: nothing is committed. Fails if the namenode does not
// compare the datanode's registration with the one that took the writes.
func TestDeferredDataSyncRestartedDatanodeRefusesCommit(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	ctx := context.Background()
	cl := c.Client(client.Config{DeferDataSync: true})
	defer cl.Close()
	tx := cl.Begin()
	f, err := tx.CreateFile(ctx, "/a", client.CreateOptions{Rep: 2})
	testkit.MustOK(t, "create", err)
	_, err = f.Write(testkit.RandomBytes(t, 5000))
	testkit.MustOK(t, "write", err)
	testkit.MustOK(t, "flush", f.Flush(ctx))
	c.Kill(c.DNs[0])
	c.WaitLive(1)
	c.StartDatanode(c.DNs[0])
	c.WaitLive(2)
	err = tx.CommitAsync(ctx)
	if err == nil {
		t.Fatal("async commit with data unsynced on a datanode that restarted since succeeded: a power cut could lose its data")
	}
	if !strings.Contains(err.Error(), "restarted") {
		t.Fatalf("commit refused, but not for the restart: %v", err)
	}
	if _, err := cl.Lookup(ctx, "/a"); err == nil {
		t.Fatal("/a exists after its commit was refused")
	}
}

// TestDeferredDataSyncLostDatanodeFailsSync: an async commit leaves its
// data unsynced on both datanodes; one is killed; the Sync that would make
// the commit durable fails (the namenode stops rather than fsync its log
// over data it could not make durable). Fails if the namenode does not
// sync the datanodes before its log.
func TestDeferredDataSyncLostDatanodeFailsSync(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{NamenodeArgs: []string{"-sync-interval", "1h", "-sync-commits", "1000000"}})
	ctx := context.Background()
	cl := c.Client(client.Config{DeferDataSync: true})
	defer cl.Close()
	writeDeferred(t, cl, "/a", testkit.RandomBytes(t, 5000))
	c.Kill(c.DNs[0])
	c.WaitLive(1)
	if err := cl.Sync(ctx); err == nil {
		t.Fatal("Sync succeeded though a datanode holding the commit's unsynced data was gone")
	}
	if code := c.Wait(c.NN); code == 0 {
		t.Fatal("the namenode exited with status 0 after failing to sync a datanode")
	}
	if log := c.ReadLog(c.NN); !strings.Contains(log, "unsynced data of async commits") {
		t.Fatalf("the namenode's log does not name the datanode it could not sync:\n%s", log)
	}
}
