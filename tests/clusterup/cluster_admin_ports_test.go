package clusterup

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/plasmafs/plasma/tests/testkit"
)

// TestClusterUpAdminPorts (issue 25): 'cluster up' gives every member an
// admin port on loopback, prints them and records them in settings.json;
// each serves /metrics, the namenode's status page links to each
// datanode's, and a later 'cluster up' keeps the recorded ports.
func TestClusterUpAdminPorts(t *testing.T) {
	lc := newLocalCluster(t)
	out := lc.mustRun(lc.upArgs("-detach")...)
	var s struct {
		AdminAddrs map[string]string `json:"admin_addrs"`
	}
	b, err := os.ReadFile(filepath.Join(lc.dir, "settings.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"namenode", "dn1", "dn2", "ts1", "ts2"} {
		a := s.AdminAddrs[m]
		if !strings.HasPrefix(a, "127.0.0.1:") {
			t.Fatalf("settings.json admin_addrs[%s] = %q, want a loopback address: %s", m, a, b)
		}
		if !strings.Contains(out, m+" "+a) {
			t.Errorf("cluster up does not list %s's admin port %s:\n%s", m, a, out)
		}
		testkit.MetricSum(t, testkit.Scrape(t, a), "go_goroutines", nil)
	}
	resp, err := http.Get("http://" + s.AdminAddrs["namenode"] + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, dn := range []string{"dn1", "dn2"} {
		if link := `href="http://` + s.AdminAddrs[dn] + `/metrics"`; !strings.Contains(string(page), link) {
			t.Errorf("status page has no link %s to %s's admin page", link, dn)
		}
	}

	lc.mustRun("cluster", "down", "-dir", lc.dir)
	lc.mustRun(lc.upArgs("-detach")...)
	b2, _ := os.ReadFile(filepath.Join(lc.dir, "settings.json"))
	var s2 struct {
		AdminAddrs map[string]string `json:"admin_addrs"`
	}
	json.Unmarshal(b2, &s2)
	if s2.AdminAddrs["namenode"] != s.AdminAddrs["namenode"] {
		t.Errorf("the namenode's admin port moved from %s to %s across cluster up", s.AdminAddrs["namenode"], s2.AdminAddrs["namenode"])
	}
}
