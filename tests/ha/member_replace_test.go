package ha

import (
	"os"
	"testing"
)

// Issue 22, item 5: a dead member (its machine gone) is replaced while
// clients commit: a new namenode joins with an empty database, is added,
// and the dead one removed. The group is then the two old members left
// and the new one: with one of the old ones killed it goes on committing
// on the leader and the new member alone (with the dead member still
// counted, two of four would not be a majority). The new member's
// database holds every acknowledged commit.
func TestDeadMemberReplaced(t *testing.T) {
	g := startGroup(t, 3, 0)
	w := startWriters(g, 4, "rp")
	w.waitAcked(t, 100)
	dead := g.follower()
	g.kill(dead)
	os.RemoveAll(dead.db + ".group")
	os.Remove(dead.db)
	n := g.joinMember("4", g.groupID())
	g.mustAdmin("namenode", "add", n.id, n.addr)
	g.mustAdmin("namenode", "remove", dead.id)
	w.waitAcked(t, w.count()+100)
	l := g.leader()
	for _, m := range g.members {
		if m != l && m != n && m.running() {
			g.kill(m)
		}
	}
	w.waitAcked(t, w.count()+100)
	acked := w.finish()
	g.checkHolds(acked, l, n)
}
