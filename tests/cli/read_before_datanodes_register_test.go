package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestReadBeforeDatanodesRegisterSaysSo: a read right after a namenode
// restart (or a group's failover), before the file's datanodes have
// registered again, fails saying that the datanode has not registered
// yet and to run the command again; it used to dial the empty address
// the namenode has for it and show "datanode : dial tcp: missing
// address" after "datanode ID () is down".
func TestReadBeforeDatanodesRegisterSaysSo(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Datanodes: 1, Size: 16 << 20})
	data := testkit.RandomBytes(t, 200<<10)
	if out, code := c.Run(data, "put", "-stdin", "/f"); code != 0 {
		t.Fatalf("put: exit %d:\n%s", code, out)
	}

	dn := c.DNs[0]
	c.Stop(dn) // frozen: it cannot register with the new namenode
	c.Kill(c.NN)
	c.StartNamenode()
	out, code := c.Run(nil, "cat", "/f")
	c.Continue(dn)
	if code != 1 || !strings.Contains(out, "has not registered with the namenode") || !strings.Contains(out, "run the command again") ||
		strings.Contains(out, "missing address") || strings.Contains(out, "()") {
		t.Fatalf("plasma cat before the datanode registered: exit %d:\n%s\nwant exit 1 saying it has not registered, and no empty address", code, out)
	}
	// Once it registers, the same read works.
	testkit.AwaitCond(t, 2*time.Minute, "cat /f works once the datanode registered", func() bool {
		out, code := c.Run(nil, "cat", "/f")
		return code == 0 && out == string(data)
	})
}
