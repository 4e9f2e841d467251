package powercut

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"syscall"
	"testing"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestDeferredSyncMountSurvivesDatanodeKill: small files written and
// closed through a mount (async commits, their datanode syncs deferred by
// default), then a datanode is killed (kill -9) and the mount's root is
// fsynced: the fsync succeeds, the namenode keeps running, every file
// reads back byte-exact through the mount, and after a power cut every
// file closed before the fsync is there, byte-exact, with no replica the
// cut emptied. Fails if a failed datanode sync at the durability point
// stops the namenode (the fsync fails) or the struck replicas are not
// recorded in the log.
func TestDeferredSyncMountSurvivesDatanodeKill(t *testing.T) {
	c := clustertest.StartPowerCut(t, clustertest.Options{NamenodeArgs: []string{"-sync-interval", "1h", "-sync-commits", "1000000"}})
	m := testkit.StartMount(t, c.Procs, "rep=2")
	const count = 25
	files := make([][]byte, count)
	name := func(i int) string { return fmt.Sprintf("/k%03d", i) }
	for i := range files {
		files[i] = smallFile(t, i+7000)
		testkit.MustOK(t, "write through the mount", os.WriteFile(m.Path(name(i)), files[i], 0o644))
	}
	c.Kill(c.DNs[0])
	c.WaitLive(1)
	d, err := os.Open(m.Dir)
	testkit.MustOK(t, "open the mount's root", err)
	testkit.MustOK(t, "fsync the mount's root after a datanode holding unsynced data was killed", d.Sync())
	d.Close()
	if !c.NN.Running() {
		t.Fatalf("the namenode stopped after a datanode failed its sync:\n%s", c.ReadLog(c.NN))
	}
	for i := range files {
		got, err := os.ReadFile(m.Path(name(i)))
		testkit.MustOK(t, "read through the mount", err)
		if !bytes.Equal(got, files[i]) {
			t.Fatalf("%s reads back wrong through the mount (%d bytes, want %d)", name(i), len(got), len(files[i]))
		}
	}
	m.Signal(syscall.SIGKILL)
	m.Wait()
	c.PowerCut()
	cl := c.Client(client.Config{})
	defer cl.Close()
	for i := range files {
		if _, err := cl.Lookup(context.Background(), name(i)); err != nil {
			t.Fatalf("%s, closed before the fsync, is gone after the power cut: %v", name(i), err)
		}
		if got := testkit.ReadFile(t, cl, name(i)); !bytes.Equal(got, files[i]) {
			t.Fatalf("%s reads back wrong after the power cut (%d bytes, want %d)", name(i), len(got), len(files[i]))
		}
		if on, _ := replicasOn(t, cl, name(i), c.DNs[0].Addr); on > 0 {
			t.Fatalf("%s lists a replica on the killed datanode, whose unsynced writes the power cut lost", name(i))
		}
	}
}
