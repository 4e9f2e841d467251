package replication

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// Issue 23: 'plasma admin datanode remove' takes a drained or dead
// datanode out of the cluster for good (internal/namenode/nodesremove.go).

// listsDatanode reports whether 'plasma admin datanodes' lists identity.
func listsDatanode(t *testing.T, c *clustertest.Procs, identity string) bool {
	t.Helper()
	return strings.Contains(c.MustRun("admin", "datanodes", "-json"), `"identity":"`+identity+`"`)
}

// awaitService polls until the datanode with identity is in service
// state want.
func awaitService(t *testing.T, c *clustertest.Procs, identity, want string) {
	t.Helper()
	for deadline := time.Now().Add(120 * time.Second); ; {
		if row := datanodeRowOf(t, c, identity); row.Service == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("datanode %s not %s after 120s:\n%s", identity, want, c.MustRun("admin", "datanodes"))
		}
		time.Sleep(100 * time.Millisecond) // polling a condition, not timing the test
	}
}

// refusedOnReturn starts datanode p again and checks that the namenode
// refuses its volume, saying it was removed, and never lists it again.
func refusedOnReturn(t *testing.T, c *clustertest.Procs, p *clustertest.Proc, identity string) {
	t.Helper()
	c.StartDatanode(p)
	for deadline := time.Now().Add(60 * time.Second); p.Running(); {
		if time.Now().After(deadline) {
			t.Fatalf("the removed datanode's process still runs after 60s:\n%s\n%s", c.ReadLog(p), c.MustRun("admin", "datanodes"))
		}
		time.Sleep(50 * time.Millisecond) // polling a condition, not timing the test
	}
	if code := c.Wait(p); code == 0 {
		t.Fatalf("the removed datanode's process exited 0:\n%s", c.ReadLog(p))
	}
	if log := c.ReadLog(p); !strings.Contains(log, "was removed from the cluster") {
		t.Fatalf("the removed datanode's process does not say it was removed:\n%s", log)
	}
	if listsDatanode(t, c, identity) {
		t.Fatalf("the removed datanode %s is listed again:\n%s", identity, c.MustRun("admin", "datanodes"))
	}
}

// TestRemoveDrainedDatanode: a drained datanode is removed: no longer
// listed, also after a namenode crash; its volume is refused when it comes
// back; the files are intact and a new datanode gets a new id.
func TestRemoveDrainedDatanode(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Datanodes: 3, Size: 64 << 20})
	cl := c.Client(client.Config{})
	defer cl.Close()
	files := map[string][]byte{}
	for i := range 6 {
		p := fmt.Sprintf("/r%d", i)
		files[p] = testkit.RandomBytes(t, 1+i*200<<10)
		testkit.WriteFile(t, cl, p, files[p], 2)
	}
	gone := identityOf(t, c, c.DNs[1])
	// Not drained: refused, saying what to do.
	if out, code := c.Run(nil, "admin", "datanode", "remove", gone); code == 0 || !strings.Contains(out, "drain it first") {
		t.Fatalf("remove of a datanode in service: exit %d:\n%s", code, out)
	}
	c.MustRun("admin", "datanode", "drain", gone)
	awaitService(t, c, gone, "drained")
	if out := c.MustRun("admin", "datanode", "remove", gone); !strings.Contains(out, "removed from the cluster") {
		t.Fatalf("remove of a drained datanode:\n%s", out)
	}
	if listsDatanode(t, c, gone) {
		t.Fatalf("datanode %s still listed after remove:\n%s", gone, c.MustRun("admin", "datanodes"))
	}
	// Recorded before the answer: a namenode crash does not bring it back.
	c.Kill(c.NN)
	c.Kill(c.DNs[1])
	c.StartNamenode()
	c.WaitLive(2)
	if listsDatanode(t, c, gone) {
		t.Fatalf("datanode %s listed again after a namenode restart:\n%s", gone, c.MustRun("admin", "datanodes"))
	}
	refusedOnReturn(t, c, c.DNs[1], gone)
	cl.Close()
	cl = c.Client(client.Config{})
	defer cl.Close()
	awaitReplicas(t, c, cl, files, 2, map[string]bool{gone: true}, 60*time.Second)
	checkContents(t, c, files)
	// A new volume joins with an id of its own, never the removed one's.
	added := c.AddDatanode()
	c.WaitLive(3)
	nodes, err := cl.Datanodes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if n.Addr == added.Addr && n.ID <= 3 {
			t.Fatalf("the new datanode got id %d, not above every earlier one (3)", n.ID)
		}
	}
}

// TestRemoveDeadDatanode: a dead datanode holding the only replica of a
// file is not removed (the refusal says so); once that file is gone, it
// is, its replicas are struck from the block lists and replaced on the
// survivors, and its volume is refused when it comes back.
func TestRemoveDeadDatanode(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Datanodes: 3, Size: 64 << 20, NamenodeArgs: []string{"-dead-after", "1s"}})
	cl := c.Client(client.Config{})
	defer cl.Close()
	files := map[string][]byte{}
	for i := range 6 {
		p := fmt.Sprintf("/k%d", i)
		files[p] = testkit.RandomBytes(t, 100<<10+i*90<<10)
		testkit.WriteFile(t, cl, p, files[p], 2)
	}
	testkit.WriteFile(t, cl, "/single", testkit.RandomBytes(t, 70<<10), 1)
	blocks, err := replicaCounts(context.Background(), cl, "/single")
	if err != nil || len(blocks[0]) != 1 {
		t.Fatalf("replicas of /single: %v %v", blocks, err)
	}
	victim := blocks[0][0]
	var proc *clustertest.Proc
	for _, p := range c.DNs {
		if identityOf(t, c, p) == victim {
			proc = p
		}
	}
	c.Kill(proc)
	awaitService(t, c, victim, "dead")
	out, code := c.Run(nil, "admin", "datanode", "remove", victim)
	if code == 0 || !strings.Contains(out, "holds the only replica of") || !strings.Contains(out, "/single") {
		t.Fatalf("remove of a dead datanode holding the only replica of /single: exit %d:\n%s", code, out)
	}
	if !listsDatanode(t, c, victim) {
		t.Fatal("a refused remove removed the datanode")
	}
	c.MustRun("rm", "/single")
	if out := c.MustRun("admin", "datanode", "remove", victim); !strings.Contains(out, "removed from the cluster") {
		t.Fatalf("remove of a dead datanode:\n%s", out)
	}
	// Its replicas are no longer listed at all, and the survivors hold
	// two of every block.
	awaitReplicas(t, c, cl, files, 2, map[string]bool{victim: true}, 120*time.Second)
	checkContents(t, c, files)
	refusedOnReturn(t, c, proc, victim)
	checkContents(t, c, files)
}
