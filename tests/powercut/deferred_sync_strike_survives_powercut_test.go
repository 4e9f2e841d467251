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

// TestDeferredSyncStrikeSurvivesPowerCut: files committed asynchronously
// with their data unsynced on both datanodes; one datanode is killed; the
// Sync that makes the commits durable strikes its replicas; then a power
// cut loses that datanode's unsynced writes and brings it back: every
// file reads back byte-exact, no file lists a replica the cut emptied (fsck
// finds no damaged replica, only under-replication until re-replication
// heals it). Fails if the strike is only in memory and not in the commit
// log before the fsync that made the commits durable.
func TestDeferredSyncStrikeSurvivesPowerCut(t *testing.T) {
	c := clustertest.StartPowerCut(t, clustertest.Options{NamenodeArgs: []string{"-sync-interval", "1h", "-sync-commits", "1000000"}})
	ctx := context.Background()
	cl := c.Client(client.Config{}) // deferral is the default
	files := map[string][]byte{}
	for i := 0; i < 30; i++ {
		p := fmt.Sprintf("/s%02d", i)
		files[p] = smallFile(t, i+6000)
		writeDeferred(t, cl, p, files[p])
	}
	killed := c.DNs[0]
	c.Kill(killed)
	c.WaitLive(1)
	testkit.MustOK(t, "Sync after a datanode holding unsynced data of async commits was killed", cl.Sync(ctx))
	cl.Close()

	c.PowerCut()
	cl = c.Client(client.Config{})
	defer cl.Close()
	for p, want := range files {
		if got := testkit.ReadFile(t, cl, p); !bytes.Equal(got, want) {
			t.Fatalf("%s reads back wrong after the power cut (%d bytes, want %d)", p, len(got), len(want))
		}
	}
	testkit.AwaitCond(t, 2*time.Minute, "fsck clean after re-replication", func() bool {
		rep, err := cl.Fsck(ctx)
		testkit.MustOK(t, "fsck after the power cut", err)
		for _, p := range rep.Problems {
			if !strings.Contains(p, "have 1 of 2 replicas") {
				t.Fatalf("fsck after the power cut finds more than under-replication: %s (%d problems)", p, len(rep.Problems))
			}
		}
		return len(rep.Problems) == 0
	})
	for p, want := range files {
		if got := testkit.ReadFile(t, cl, p); !bytes.Equal(got, want) {
			t.Fatalf("%s reads back wrong after re-replication (%d bytes, want %d)", p, len(got), len(want))
		}
	}
}
