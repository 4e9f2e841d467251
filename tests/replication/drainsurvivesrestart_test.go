package replication

import (
	"fmt"
	"testing"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestDrainSurvivesNamenodeRestart: a drain and a disable, once
// answered, outlive a namenode crash: after the restart the drained
// datanode is still draining (or drained) and ends empty, the disabled
// one still disabled; enabling clears the drain for good.
func TestDrainSurvivesNamenodeRestart(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Datanodes: 3, Size: 64 << 20})
	cl := c.Client(client.Config{})
	files := map[string][]byte{}
	for i := range 6 {
		p := fmt.Sprintf("/n%d", i)
		files[p] = testkit.RandomBytes(t, 1+i*200<<10)
		testkit.WriteFile(t, cl, p, files[p], 1)
	}
	cl.Close()
	drained, disabled := identityOf(t, c, c.DNs[0]), identityOf(t, c, c.DNs[1])
	c.MustRun("admin", "datanode", "drain", drained)
	c.MustRun("admin", "datanode", "disable", disabled)
	c.Kill(c.NN)
	c.StartNamenode()
	c.WaitLive(3)
	if row := datanodeRowOf(t, c, drained); row.Service != "draining" && row.Service != "drained" {
		t.Fatalf("the drained datanode is %q after a namenode restart, want draining or drained", row.Service)
	}
	if row := datanodeRowOf(t, c, disabled); row.Service != "disabled" {
		t.Fatalf("the disabled datanode is %q after a namenode restart", row.Service)
	}
	awaitService(t, c, drained, "drained")
	cl = c.Client(client.Config{})
	defer cl.Close()
	awaitReplicas(t, c, cl, files, 1, map[string]bool{drained: true}, 60*time.Second)
	checkContents(t, c, files)

	c.MustRun("admin", "datanode", "enable", drained)
	c.Kill(c.NN)
	c.StartNamenode()
	c.WaitLive(3)
	if row := datanodeRowOf(t, c, drained); row.Service != "in service" {
		t.Fatalf("the enabled datanode is %q after a namenode restart", row.Service)
	}
}
