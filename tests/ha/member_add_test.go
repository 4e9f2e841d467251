package ha

import (
	"os"
	"strings"
	"testing"
)

// Issue 22, item 5: a namenode added to a running group while clients
// commit starts from an empty database, is seeded by the leader with a
// copy of its store (the group's log never holds its formation, so a new
// member always starts from a copy) and catches up from the log. Once
// added it votes: a group of 4 needs 3, so with an old follower killed
// the group commits only with the new member's votes. Its own database
// then holds every acknowledged commit, and every member's group file
// lists it.
func TestMemberAddedUnderLoadCatchesUp(t *testing.T) {
	g := startGroup(t, 3, 0)
	w := startWriters(g, 4, "add")
	w.waitAcked(t, 100)
	m := g.joinMember("4", g.groupID())
	out := g.mustAdmin("namenode", "add", m.id, m.addr)
	t.Logf("plasma admin namenode add: %s", out)
	if !logHas(m, "seeded with the leader's copy") {
		t.Fatalf("the new member did not start from a copy of the leader's store")
	}
	st, err := g.status(m)
	if err != nil || st.role != "follower" {
		t.Fatalf("the added member is %+v (%v), not a voting follower", st, err)
	}
	w.waitAcked(t, w.count()+100)
	// A group of 4 needs 3: with one old follower down, the group commits
	// only if the new member votes.
	f := g.follower()
	if f == m {
		for _, x := range g.members {
			if x != m && x != g.leader() {
				f = x
			}
		}
	}
	g.kill(f)
	w.waitAcked(t, w.count()+100)
	acked := w.finish()
	g.checkHolds(acked, g.without(f)...)
	// Every member records the members now in its group file (a restart
	// accepts -peers listing them).
	for _, x := range g.without(f) {
		b, err := os.ReadFile(x.db + ".group/group")
		if err != nil || !strings.Contains(string(b), `"members"`) || !strings.Contains(string(b), m.addr) {
			t.Errorf("member %s's group file does not list the new member: %v\n%s", x.id, err, b)
		}
	}
}
