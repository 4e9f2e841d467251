package replication

import (
	"context"
	"testing"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestCopySourceDamagedInRun: a file's blocks are copied in runs (one
// copy task per run of consecutive blocks, the source sending several at
// a time). Each of the two replicas has a different block in the middle
// of the run damaged on disk, so a copy of the run fails from either
// source after some of its blocks reached the destination. Nothing of a
// failed run is attached; the sources' refusals have their damaged blocks
// verified and condemned, those blocks are copied from the other replica,
// and raising the replication 2 -> 3 ends with every block at three good
// replicas, the damaged ones gone (fsck reads them all), byte for byte.
// Without the verification of what a copy's source refuses, each run
// fails from both sources for ever.
func TestCopySourceDamagedInRun(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Datanodes: 4, Size: 16 << 20})
	cl := c.Client(client.Config{})
	defer cl.Close()
	const blocks = 6
	data := testkit.RandomBytes(t, blocks*int(c.Opts.Blocksize))
	files := map[string][]byte{"/run": data}
	testkit.WriteFile(t, cl, "/run", data, 2)
	awaitReplicas(t, c, cl, files, 2, nil, 60*time.Second)

	// The run: one extent, the same two datanodes for every block.
	first, err := replicaRuns(context.Background(), cl, "/run", 0)
	if err != nil || len(first) != 2 {
		t.Fatalf("replicas of block 0: %v %v", first, err)
	}
	for idx := uint64(1); idx < blocks; idx++ {
		runs, err := replicaRuns(context.Background(), cl, "/run", idx)
		if err != nil || len(runs) != 2 {
			t.Fatalf("replicas of block %d: %v %v", idx, runs, err)
		}
		for j := range runs {
			if runs[j][0] != first[j][0] || runs[j][1].(uint64) != first[j][1].(uint64)+idx {
				t.Fatalf("the file is not one run of blocks: block 0 at %v, block %d at %v", first, idx, runs)
			}
		}
	}
	// Block 1 damaged on the first replica, block 3 on the second.
	flipByteAt(t, c, [2]any{first[0][0], first[0][1].(uint64) + 1})
	flipByteAt(t, c, [2]any{first[1][0], first[1][1].(uint64) + 3})

	c.MustRun("setrep", "3", "/run")
	awaitReplicas(t, c, cl, files, 3, nil, 120*time.Second)
	checkContents(t, c, files)
}
