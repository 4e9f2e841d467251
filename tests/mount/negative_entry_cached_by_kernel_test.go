package mount

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestNegativeEntryCachedByKernel: in a directory the mount holds a lease
// on, a missing name looked up again and again (a build probing include
// paths, a shell its PATH) is answered by the kernel from a negative
// entry: the mount sees few of the lookups (one per lease renewal), not
// one per stat.
func TestNegativeEntryCachedByKernel(t *testing.T) {
	testkit.NeedFUSE(t)
	c := clustertest.Start(t, clustertest.Options{})
	admin := clustertest.FreeAddr(t)
	m := testkit.StartMountFlags(t, c, []string{"-admin-listen", admin})
	d := m.Path("d")
	testkit.MustOK(t, "mkdir", os.Mkdir(d, 0o755))
	lookups := func() float64 {
		return testkit.MetricSumOr0(testkit.Scrape(t, admin), "plasma_mount_requests_total", map[string]string{"op": "lookup"})
	}
	// Two names the namenode does not find make the mount lease d.
	for _, n := range []string{"probe1", "probe2", "none"} {
		if !missing(t, filepath.Join(d, n)) {
			t.Fatalf("%s exists", n)
		}
	}
	const stats = 200
	before := lookups()
	for range stats {
		if !missing(t, filepath.Join(d, "none")) {
			t.Fatal("none exists")
		}
	}
	if got := lookups() - before; got > stats/2 {
		t.Errorf("%v of %d stats of a missing name in a leased directory reached the mount as LOOKUP", got, stats)
	}
}
