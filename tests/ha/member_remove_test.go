package ha

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// Issue 22, item 5: a member removed while clients commit leaves a group
// with a new majority: of four members, one removed (and stopped) leaves
// three, of which two are a majority, so with another follower killed
// the group goes on committing (with the removed member still counted,
// two of four would not be). The removed member is told, says so and
// refuses to start again with its state. Every acknowledged commit is in
// the databases of the members left.
func TestRemovedMemberLeavesNewMajority(t *testing.T) {
	g := startGroup(t, 4, 0)
	w := startWriters(g, 4, "rm")
	w.waitAcked(t, 100)
	r := g.follower()
	g.mustAdmin("namenode", "remove", r.id)
	// The removed member is told: it says so, and refuses to start again
	// with its state.
	g.waitRole(r, "removed")
	g.kill(r)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	out, err := exec.CommandContext(ctx, g.bin, "namenode", "-db", r.db, "-security", "none", "-peers", g.peers(), "-id", r.id).CombinedOutput()
	cancel()
	if err == nil || !strings.Contains(string(out), "was removed from group") {
		t.Fatalf("the removed member started again with its state: %v\n%s", err, out)
	}
	w.waitAcked(t, w.count()+100)
	f := g.follower()
	g.kill(f)
	w.waitAcked(t, w.count()+100)
	acked := w.finish()
	var left []*member
	for _, m := range g.members {
		if m.running() {
			left = append(left, m)
		}
	}
	g.checkHolds(acked, left...)
}
