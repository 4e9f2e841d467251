package replication

import (
	"strconv"
	"testing"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestCopyBandwidthBounded: a datanode started with -copy-rate paces the
// blocks it sends for re-replication (a token bucket holding four
// blocks): raising a file of twelve blocks from replication 1 to 2 at one
// block a second makes its copies wait, which the datanodes' metric of
// throttled time shows; the copies still complete, byte for byte.
// Without the pacing the metric stays at zero.
func TestCopyBandwidthBounded(t *testing.T) {
	const bs = 64 << 10
	c := clustertest.Start(t, clustertest.Options{Datanodes: 2, Size: 16 << 20, Blocksize: bs, Admin: true,
		DatanodeArgs: []string{"-copy-rate", strconv.Itoa(bs)}})
	cl := c.Client(client.Config{})
	defer cl.Close()
	files := map[string][]byte{"/paced": testkit.RandomBytes(t, 12*bs)}
	testkit.WriteFile(t, cl, "/paced", files["/paced"], 1)
	awaitReplicas(t, c, cl, files, 1, nil, 60*time.Second)
	c.MustRun("setrep", "2", "/paced")
	awaitReplicas(t, c, cl, files, 2, nil, 120*time.Second)
	checkContents(t, c, files)
	var waited float64
	for _, dn := range c.DNs {
		waited += testkit.MetricSum(t, testkit.Scrape(t, dn.AdminAddr), "plasma_datanode_copy_throttled_seconds_total", nil)
	}
	// Twelve blocks against a bucket of four filled at one a second: the
	// last eight wait about eight seconds together; any wait shows the
	// bound at work.
	if waited <= 0 {
		t.Fatalf("copies of 12 blocks at -copy-rate %d (one block a second) never waited: plasma_datanode_copy_throttled_seconds_total %v", bs, waited)
	}
}
