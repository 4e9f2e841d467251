package ha

import (
	"testing"
	"time"
)

// Issue 22, item 5: a follower down while the leader's log moves on past
// what it keeps (-log-keep: the log is compacted behind each snapshot)
// cannot catch up from the log when it comes back: the leader seeds it
// with a copy of its store, then the log after the copy; its database
// then holds every acknowledged commit.
func TestLaggingMemberSeededAfterLogCompacted(t *testing.T) {
	g := startGroupWith(t, 3, 0, groupOptions{MemberArgs: []string{"-log-keep", "16", "-snapshot-interval", "50ms"}})
	w := startWriters(g, 4, "seed")
	w.waitAcked(t, 50)
	f := g.follower()
	g.kill(f)
	l := g.leader()
	start, err := g.status(l)
	if err != nil {
		t.Fatal(err)
	}
	// Far more entries than the log keeps (16, snapshots every 4).
	deadline := time.Now().Add(90 * time.Second)
	for {
		st, err := g.status(l)
		if err == nil && st.last > start.last+200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the leader's log did not grow by 200 entries in 90s: %+v %v", st, err)
		}
		time.Sleep(20 * time.Millisecond) // polling a condition
	}
	g.startMember(f, g.peers())
	w.waitAcked(t, w.count()+100)
	acked := w.finish()
	g.waitCaughtUp()
	if !logHas(f, "seeded with the leader's copy") {
		t.Fatalf("the follower caught up without a copy of the leader's store: was the log not compacted?")
	}
	g.checkHolds(acked, g.members...)
}
