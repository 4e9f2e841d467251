package webhdfs

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestWebHDFSOpenAllocatesPerRangeNotPerReadAhead (issue 26, OPEN speed):
// a whole-file OPEN streams the file with the client's WriteTo, which
// used to allocate a fresh, zeroed block buffer for each of its eight
// read-ahead slots whatever the file's size: eight blocks of garbage per
// OPEN of a few bytes (8 MiB on a cluster of 1 MiB blocks), which made a
// small file's OPEN cost milliseconds of CPU. The gateway's own
// allocations (go_memstats_alloc_bytes_total of its -admin-listen) over
// many OPENs of small and multi-block files must stay below one block
// per OPEN; and files of other sizes read in turn (pooled buffers reused
// from one OPEN to the next) come back byte-exact.
func TestWebHDFSOpenAllocatesPerRangeNotPerReadAhead(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	c.MustRun("chmod", "777", "/")
	admin := clustertest.FreeAddr(t)
	g := startWebHDFS(t, c, "-admin-listen", admin)
	const bs = 64 << 10 // the test cluster's blocksize
	files := map[string][]byte{
		"/small":  testkit.RandomBytes(t, 3000),
		"/blocks": testkit.RandomBytes(t, 2*bs+bs/2),
		"/one":    testkit.RandomBytes(t, bs),
	}
	for name, data := range files {
		if r := webhdfsDo(t, "PUT", g.url(name, "CREATE", "user.name", "alice", "data", "true"), bytes.NewReader(data)); r.Status != 201 {
			t.Fatalf("CREATE %s: %d %s", name, r.Status, r.Body)
		}
	}
	open := func(name string, kv ...string) {
		t.Helper()
		resp := webhdfsGet(t, g.url(name, "OPEN", append([]string{"user.name", "alice"}, kv...)...))
		want := files[name]
		if len(kv) > 0 {
			want = want[bs+5:]
		}
		if resp.Status != 200 || !bytes.Equal(resp.Body, want) {
			t.Fatalf("OPEN %s %v: status %d, %d bytes, not the %d bytes of the file", name, kv, resp.Status, len(resp.Body), len(want))
		}
	}
	// Warm up: the gateway's first requests set up connections and
	// caches whose allocations are not per OPEN.
	for name := range files {
		open(name)
	}
	allocated := func() float64 {
		return testkit.MetricSum(t, testkit.Scrape(t, admin), "go_memstats_alloc_bytes_total", nil)
	}
	const rounds = 40
	before := allocated()
	for range rounds {
		open("/small")
		open("/blocks")
		open("/one")
		open("/blocks", "offset", fmt.Sprint(bs+5)) // streamed from inside a block
	}
	opens := 4 * rounds
	per := (allocated() - before) / float64(opens)
	t.Logf("%.0f bytes per OPEN", per)
	if per >= bs {
		t.Errorf("the gateway allocated %.0f bytes per OPEN over %d OPENs (%.1f blocks each), want less than one block", per, opens, per/bs)
	}
}
