package metrics

import (
	"fmt"
	"io"
	"net/http"
	"os/user"
	"strings"
	"testing"

	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestMetricsOfWebHDFSGateway (issue 26): 'plasma webhdfs -admin-listen'
// serves /metrics with the Go runtime's metrics and
// plasma_webhdfs_requests_total by operation, which moves with the
// requests served; requests that name no WebHDFS operation are counted
// as "other" (a fixed set of labels, whatever clients send).
func TestMetricsOfWebHDFSGateway(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	c.MustRun("mkdir", "/wh")
	admin := clustertest.FreeAddr(t)
	line := startDaemon(t, c, "plasma: serving WebHDFS on ", "webhdfs", "-listen", "127.0.0.1:0", "-admin-listen", admin)
	base := strings.TrimSuffix(strings.TrimPrefix(line, "plasma: serving WebHDFS on "), "/")
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	get := func(path, query string) int {
		t.Helper()
		resp, err := http.Get(fmt.Sprintf("%s%s?%s&user.name=%s", base, path, query, u.Username))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	mfs := testkit.Scrape(t, admin)
	testkit.MetricSum(t, mfs, "go_goroutines", nil)
	before := map[string]float64{}
	for _, op := range []string{"GETFILESTATUS", "LISTSTATUS", "other"} {
		before[op] = testkit.MetricSumOr0(mfs, "plasma_webhdfs_requests_total", map[string]string{"op": op})
	}
	for range 2 {
		if st := get("/wh", "op=GETFILESTATUS"); st != http.StatusOK {
			t.Fatalf("GETFILESTATUS /wh: status %d", st)
		}
	}
	if st := get("/", "op=liststatus"); st != http.StatusOK {
		t.Fatalf("LISTSTATUS /: status %d", st)
	}
	if st := get("/wh", "op=NOSUCHOP"); st != http.StatusBadRequest {
		t.Errorf("op=NOSUCHOP: status %d, want 400", st)
	}
	mfs = testkit.Scrape(t, admin)
	for op, want := range map[string]float64{"GETFILESTATUS": 2, "LISTSTATUS": 1, "other": 1} {
		if d := testkit.MetricSumOr0(mfs, "plasma_webhdfs_requests_total", map[string]string{"op": op}) - before[op]; d != want {
			t.Errorf("plasma_webhdfs_requests_total{op=%q} moved by %v, want %v", op, d, want)
		}
	}
	if v := testkit.MetricSumOr0(mfs, "plasma_webhdfs_requests_total", map[string]string{"op": "NOSUCHOP"}); v != 0 {
		t.Errorf("an unknown op has a label of its own: %v", v)
	}
}
