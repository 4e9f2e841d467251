package mount

import (
	"bytes"
	"os"
	"testing"

	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestMountWritesBeforeDatanodesRegister restarts the namenode while its
// only datanode is frozen, then writes a new file through the mount: the
// create (an Auto transaction) and the allocations are refused for want
// of live datanodes until the datanode, resumed, registers again; the
// client library waits that out (client.Config.AllocWait), so the write
// succeeds and reads back byte-exact after a remount. Without the wait
// the write fails (EIO).
func TestMountWritesBeforeDatanodesRegister(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Datanodes: 1})
	m := testkit.StartMount(t, c)
	dn := c.DNs[0]
	c.Stop(dn)
	c.Kill(c.NN)
	mark := testkit.LogSize(c.NN.Log)
	c.StartNamenode()

	data := testkit.RandomBytes(t, 1<<20+777)
	done := make(chan error, 1)
	go func() { done <- os.WriteFile(m.Path("after-restart"), data, 0o644) }()
	testkit.WaitUnavailableRefusal(t, c.NN.Log, mark, done)
	c.Continue(dn)
	testkit.MustOK(t, "write through the mount across the restart", <-done)

	m2 := testkit.StartMount(t, c)
	got, err := os.ReadFile(m2.Path("after-restart"))
	testkit.MustOK(t, "read back", err)
	if !bytes.Equal(got, data) {
		t.Fatalf("after-restart: read %d bytes, not the %d written", len(got), len(data))
	}
}
