package metrics

import (
	"testing"

	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestMetricsCountWork (issue 25): the namenode's and every datanode's
// /metrics parse with the Prometheus text parser, and their counters move
// with the work done: a put of N blocks at replication 2 moves the
// datanodes' bytes written by exactly 2·N blocks, the namenode's commits
// and allocate requests move, and its gauges tell two live datanodes and
// the blocks they hold.
func TestMetricsCountWork(t *testing.T) {
	const bs, nblocks = 64 << 10, 5
	c := clustertest.Start(t, clustertest.Options{Admin: true, Blocksize: bs})
	dnWritten := func() float64 {
		var sum float64
		for _, dn := range c.DNs {
			sum += testkit.MetricSum(t, testkit.Scrape(t, dn.AdminAddr), "plasma_datanode_written_bytes_total", nil)
		}
		return sum
	}
	nn0 := testkit.Scrape(t, c.NN.AdminAddr)
	written0 := dnWritten()

	c.MustRun("put", "-q", "-rep", "2", localFile(t, nblocks*bs), "/f")

	if got, want := dnWritten()-written0, float64(2*nblocks*bs); got != want {
		t.Errorf("datanodes' plasma_datanode_written_bytes_total moved by %v for a put of %d blocks of %d bytes at replication 2, want %v", got, nblocks, bs, want)
	}
	nn1 := testkit.Scrape(t, c.NN.AdminAddr)
	moved := func(name string, labels map[string]string) float64 {
		return testkit.MetricSum(t, nn1, name, labels) - testkit.MetricSumOr0(nn0, name, labels)
	}
	if d := moved("plasma_namenode_commits_total", nil); d < 1 {
		t.Errorf("plasma_namenode_commits_total moved by %v for a put", d)
	}
	if d := moved("plasma_namenode_commit_duration_seconds", map[string]string{"mode": "durable"}); d < 1 {
		t.Errorf("durable commit latencies observed: %v more, want at least 1", d)
	}
	if d := moved("plasma_namenode_requests_total", map[string]string{"op": "allocate"}); d < 1 {
		t.Errorf("allocate requests moved by %v for a put", d)
	}
	if d := moved("plasma_namenode_fsync_duration_seconds", nil); d < 1 {
		t.Errorf("fsyncs observed: %v more, want at least 1 for a durable commit", d)
	}
	if v := testkit.MetricSum(t, nn1, "plasma_namenode_datanodes", map[string]string{"state": "live"}); v != 2 {
		t.Errorf("plasma_namenode_datanodes{state=live} = %v, want 2", v)
	}
	if v := testkit.MetricSum(t, nn1, "plasma_namenode_blocks", map[string]string{"state": "used"}); v != 2*nblocks {
		t.Errorf("plasma_namenode_blocks{state=used} = %v, want %d", v, 2*nblocks)
	}
	for _, name := range []string{"plasma_namenode_open_transactions", "plasma_namenode_locks_held", "plasma_namenode_directory_leases",
		"plasma_namenode_datanode_heartbeat_age_seconds", "go_goroutines", "process_resident_memory_bytes"} {
		testkit.MetricSum(t, nn1, name, nil) // present
	}
	for _, dn := range c.DNs {
		mfs := testkit.Scrape(t, dn.AdminAddr)
		testkit.MetricSum(t, mfs, "plasma_datanode_checksum_failures_total", nil)
		testkit.MetricSum(t, mfs, "plasma_datanode_capacity_blocks", nil)
		testkit.MetricSum(t, mfs, "go_goroutines", nil)
	}
}
