package metrics

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestUnderReplicatedBlocksShown (issue 25 item 2): once a datanode
// holding a replica of every block of a file dies, the namenode's
// /metrics counts the file's blocks as under-replicated, and its status
// page shows the count (with 0 before the kill).
func TestUnderReplicatedBlocksShown(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Admin: true, Datanodes: 2, NamenodeArgs: []string{"-heartbeat-timeout", "2s"}})
	cl := c.Client(client.Config{})
	testkit.WriteFile(t, cl, "/u", testkit.RandomBytes(t, 3*int(c.Opts.Blocksize)), 2)
	cl.Close()

	const metric = "plasma_namenode_under_replicated_blocks"
	waitUnder := func(want float64) {
		t.Helper()
		var got float64 = -1
		for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline); {
			mfs := testkit.Scrape(t, c.NN.AdminAddr)
			if _, ok := mfs[metric]; ok {
				if got = testkit.MetricSum(t, mfs, metric, nil); got == want {
					return
				}
			}
			time.Sleep(50 * time.Millisecond) // polling a condition, not timing a test
		}
		t.Fatalf("%s is %v, want %v", metric, got, want)
	}
	waitUnder(0)
	c.Kill(c.DNs[1])
	waitUnder(3)

	resp, err := http.Get("http://" + c.NN.AdminAddr + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(page), `id="under-replicated">3<`) {
		t.Fatalf("the status page does not show 3 under-replicated blocks:\n%s", page)
	}
}
