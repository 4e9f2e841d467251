package replication

import (
	"bytes"
	"testing"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestReaderReportsDamagedReplica: a read that finds a replica failing
// its checksum succeeds from the other replica and reports the damaged
// one to the namenode, which has it verified and replaced like a scrub
// finding, without a scrubber or fsck running.
func TestReaderReportsDamagedReplica(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Datanodes: 3, Size: 16 << 20})
	cl := c.Client(client.Config{})
	defer cl.Close()
	files := map[string][]byte{"/r": testkit.RandomBytes(t, 300<<10)}
	testkit.WriteFile(t, cl, "/r", files["/r"], 2)
	const idx = 1
	// The first replica listed, which a read of a block below 128 tries
	// first (File.locate).
	damaged := flipReplicaByte(t, c, cl, "/r", idx)
	r := c.Client(client.Config{NoShortCircuit: true})
	defer r.Close()
	if got := testkit.ReadFile(t, r, "/r"); !bytes.Equal(got, files["/r"]) {
		t.Fatalf("read back %d bytes, not the %d written", len(got), len(files["/r"]))
	}
	awaitReplaced(t, c, cl, "/r", idx, damaged)
	awaitReplicas(t, c, cl, files, 2, nil, 60*time.Second)
	checkContents(t, c, files)
}
