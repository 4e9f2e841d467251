package ha

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// Issue 22, item 6: a member whose disk lost its Raft state (its log, or
// the whole group directory: log, votes, group record) refuses to start
// again with -peers, since it would vote with what it lost, and says how
// it comes back: removed from the group, started with -join as a new member and
// added, it is seeded by the leader and then holds every acknowledged
// commit (the group commits with it: one old member killed).
func TestMemberWithLostStateRejoinsAsNew(t *testing.T) {
	g := startGroup(t, 3, 0)
	gid := g.groupID()
	w := startWriters(g, 4, "lost")
	w.waitAcked(t, 100)
	f := g.follower()
	g.kill(f)
	// Its log file alone lost, then the whole group directory (log,
	// votes, group record): refused both times, naming -join.
	for _, lose := range []string{f.db + ".group/raft.log", f.db + ".group"} {
		if err := os.RemoveAll(lose); err != nil {
			t.Fatal(err)
		}
		// A member that started after all is stopped after a minute (and
		// the test fails: no refusal).
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		cmd := exec.CommandContext(ctx, g.bin, "namenode", "-db", f.db, "-security", "none", "-peers", g.peers(), "-id", f.id)
		out, err := cmd.CombinedOutput()
		cancel()
		if err == nil || !strings.Contains(string(out), "must not vote with") || !strings.Contains(string(out), "-join "+gid) {
			t.Fatalf("a member without %s started with -peers: %v\n%s\nwant a refusal naming -join %s", lose, err, out, gid)
		}
	}
	// The operator's steps the refusal names.
	g.mustAdmin("namenode", "remove", f.id)
	g.rejoin(f, gid)
	g.waitRole(f, "joining")
	g.mustAdmin("namenode", "add", f.id, f.addr)
	w.waitAcked(t, w.count()+100)
	l := g.leader()
	for _, m := range g.members {
		if m != l && m != f {
			g.kill(m)
		}
	}
	w.waitAcked(t, w.count()+100)
	acked := w.finish()
	g.checkHolds(acked, l, f)
}
