package ha

import (
	"testing"
)

// Issue 22, item 5: a member removed while clients commit leaves a group
// with a new majority: of four members, one removed (and stopped) leaves
// three, of which two are a majority, so with another follower killed
// the group goes on committing (with the removed member still counted,
// two of four would not be). Every acknowledged commit is in the
// databases of the members left.
func TestRemovedMemberLeavesNewMajority(t *testing.T) {
	g := startGroup(t, 4, 0)
	w := startWriters(g, 4, "rm")
	w.waitAcked(t, 100)
	r := g.follower()
	g.mustAdmin("namenode", "remove", r.id)
	g.kill(r)
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
