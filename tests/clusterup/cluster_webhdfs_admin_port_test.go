package clusterup

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/plasmafs/plasma/tests/testkit"
)

// TestClusterUpWebHDFSAdminPort (issue 26): with -webhdfs, 'cluster up'
// gives the gateway an admin port like every other member's: recorded in
// settings.json, listed in its output, serving /metrics with the
// gateway's request counter, which moves with a request to the gateway.
func TestClusterUpWebHDFSAdminPort(t *testing.T) {
	lc := newLocalCluster(t)
	t.Cleanup(func() { // the gateway too, whatever happens
		if pid := lc.pidsFile()["webhdfs"]; pid > 0 {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	out := lc.mustRun(lc.upArgs("-taskserver-slots", "0", "-webhdfs", "127.0.0.1:0", "-detach")...)
	gw := recordedWebHDFSAddr(t, lc)
	b, err := os.ReadFile(filepath.Join(lc.dir, "settings.json"))
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		AdminAddrs map[string]string `json:"admin_addrs"`
	}
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	admin := s.AdminAddrs["webhdfs"]
	if !strings.HasPrefix(admin, "127.0.0.1:") {
		t.Fatalf("settings.json admin_addrs[webhdfs] = %q, want a loopback address: %s", admin, b)
	}
	if !strings.Contains(out, "webhdfs "+admin) {
		t.Errorf("cluster up does not list the gateway's admin port %s:\n%s", admin, out)
	}
	lc.putLocal("/d", map[string][]byte{"f": []byte("hello\n")})
	before := testkit.MetricSumOr0(testkit.Scrape(t, admin), "plasma_webhdfs_requests_total", map[string]string{"op": "GETFILESTATUS"})
	checkGatewayFileLength(t, gw, "/d/f", 6)
	after := testkit.MetricSum(t, testkit.Scrape(t, admin), "plasma_webhdfs_requests_total", map[string]string{"op": "GETFILESTATUS"})
	if after-before != 1 {
		t.Errorf("the gateway's GETFILESTATUS count moved by %v for one request", after-before)
	}
}
