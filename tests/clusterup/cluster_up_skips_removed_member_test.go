package clusterup

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestClusterUpSkipsRemovedMember: after 'plasma admin namenode remove' of
// a member of a 'cluster up -namenodes 3' group (as README says), the
// cluster starts again: 'cluster up' leaves the removed member out,
// saying so and how to bring it back, and the two left (a majority of the
// group now) serve. It used to start the removed member, which refused
// its state, and 'cluster up' failed ("namenode nn1 did not start ...
// namenode nn2 exited during start-up"), every time.
func TestClusterUpSkipsRemovedMember(t *testing.T) {
	lc := newLocalCluster(t)
	lc.mustRun(lc.upArgs("-detach", "-namenodes", "3", "-datanodes", "1", "-taskserver-slots", "0")...)
	src := filepath.Join(lc.home, "f")
	if err := os.WriteFile(src, []byte("two of three\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	lc.mustRun("put", src, "/f")
	out, _ := lc.run("admin", "namenodes", "-json")
	var rows []struct{ Addr, ID, Role string }
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("admin namenodes -json: %v\n%s", err, out)
	}
	var follower string
	for _, r := range rows {
		if r.Role == "follower" {
			follower = r.ID
		}
	}
	if follower == "" {
		t.Fatalf("no follower in %+v", rows)
	}
	lc.mustRun("admin", "namenode", "remove", follower)
	lc.mustRun("cluster", "down", "-dir", lc.dir)

	out = lc.mustRun(lc.upArgs("-detach")...)
	if !strings.Contains(out, "namenode nn"+follower+" ") || !strings.Contains(out, "was removed from group") || !strings.Contains(out, "-join") {
		t.Errorf("cluster up after a member's removal does not say it left nn%s out:\n%s", follower, out)
	}
	if got := lc.mustRun("cat", "/f"); got != "two of three\n" {
		t.Fatalf("cat /f after cluster up again: %q", got)
	}
	lc.mustRun("put", src, "/g")
}
