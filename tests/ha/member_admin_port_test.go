package ha

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/plasmafs/plasma/internal/clientx"
	"github.com/plasmafs/plasma/internal/clustertest"
)

// Issue 22: group members take -admin-listen. Every member's /metrics
// shows its place in the group (term, applied and commit index, whether it
// leads); the leader's also the namenode's own metrics; every member
// serves the status page.
func TestMemberAdminPort(t *testing.T) {
	g := startGroup(t, 3, 0)
	admin := map[*member]string{}
	for _, m := range g.members {
		m.cmd.Process.Signal(syscall.SIGTERM)
		<-m.done
		admin[m] = clustertest.FreeAddr(t)
		g.start(&m.proc, "namenode", "-db", m.db, "-security", "none", "-peers", g.peers(), "-id", m.id,
			"-log-level", "warn", "-admin-listen", admin[m])
	}
	l := g.leader()
	cl := g.client()
	defer cl.Close()
	if _, err := clientx.At(clientx.Auto(cl, clientx.Durable)).MkdirAt(t.Context(), 1, "counted", 0o755); err != nil {
		t.Fatal(err)
	}
	for _, m := range g.members {
		want := []string{fmt.Sprintf(`plasma_namenode_group_leader{id="%s"} 0`, m.id), `plasma_namenode_group_applied_index{id="` + m.id + `"}`}
		if m == l {
			want = []string{fmt.Sprintf(`plasma_namenode_group_leader{id="%s"} 1`, m.id), "plasma_namenode_commit_duration_seconds"}
		}
		body := scrape(t, "http://"+admin[m]+"/metrics", want)
		if m != l && strings.Contains(body, "plasma_namenode_commit_duration_seconds") {
			t.Errorf("follower %s serves a namenode's metrics", m.id)
		}
		scrape(t, "http://"+admin[m]+"/", nil)
	}
}

// scrape gets url until it answers 200 with every string of want (a
// leader's metrics appear once it serves), for up to 60s.
func scrape(t *testing.T, url string, want []string) string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(url)
		body := ""
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			body = string(b)
			ok := resp.StatusCode == http.StatusOK
			for _, w := range want {
				ok = ok && strings.Contains(body, w)
			}
			if ok {
				return body
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s: %v; want 200 with %q:\n%.3000s", url, err, want, body)
		}
		time.Sleep(50 * time.Millisecond) // polling a condition
	}
}
