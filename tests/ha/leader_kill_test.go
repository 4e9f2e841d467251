package ha

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clientx"
	"github.com/plasmafs/plasma/tests/testkit"
)

// writers commits directory creations from several clients, each with the
// whole namenode list, half of them durable and half async, until stopped,
// and keeps what was acknowledged.
type writers struct {
	mu      sync.Mutex
	acked   []string
	unknown int
	refused int // writers ended by "not the leader" (endOnRefusal)
	other   []error
	stop    chan struct{}
	wg      sync.WaitGroup
}

func startWriters(g *group, n int, tag string) *writers {
	return startWritersWith(n, tag, g.client, false)
}

// startWritersWith starts n writers, each with a client of newClient;
// with endOnRefusal, a writer ends when told its namenode is not the
// leader (it has no other to try).
func startWritersWith(n int, tag string, newClient func() *client.Client, endOnRefusal bool) *writers {
	w := &writers{stop: make(chan struct{})}
	for i := range n {
		cl := newClient()
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			defer cl.Close()
			for j := 0; ; j++ {
				select {
				case <-w.stop:
					return
				default:
				}
				name := fmt.Sprintf("%s%d-%05d", tag, i, j)
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				d := clientx.Durable
				if i%2 == 1 {
					d = clientx.Async // acknowledged once a majority has it, too
				}
				_, err := clientx.At(clientx.Auto(cl, d)).MkdirAt(ctx, 1, name, 0)
				cancel()
				w.mu.Lock()
				switch {
				case err == nil:
					w.acked = append(w.acked, name)
				case isUnknown(err):
					w.unknown++
				case endOnRefusal && errors.Is(err, client.ErrNotLeader):
					w.refused++
					w.mu.Unlock()
					return
				default:
					// A transaction begun on the connection that broke, or
					// no leader yet: not acknowledged; the writer goes on.
					w.other = append(w.other, err)
				}
				w.mu.Unlock()
			}
		}()
	}
	return w
}

func (w *writers) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.acked)
}

// waitAcked waits until n commits are acknowledged.
func (w *writers) waitAcked(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for w.count() < n {
		if time.Now().After(deadline) {
			w.mu.Lock()
			t.Fatalf("only %d of %d commits acknowledged after 90s; other errors: %v", len(w.acked), n, w.other)
		}
		time.Sleep(10 * time.Millisecond) // polling a condition
	}
}

func (w *writers) finish() []string {
	close(w.stop)
	w.wg.Wait()
	return w.acked
}

// missing returns how many of names have is missing.
func missing(names []string, have map[string]bool) int {
	n := 0
	for _, name := range names {
		if !have[name] {
			n++
		}
	}
	return n
}

// Issue 22: kill -9 of the leader, twice, while four clients commit
// (two durable, two async):
// every acknowledged commit is on the new leader, fsck is clean, a file
// written before reads back, and once the killed members are back (as
// followers, catching up from the log) every member's own database holds
// every acknowledged commit.
func TestLeaderKilledAcknowledgedCommitsSurvive(t *testing.T) {
	g := startGroup(t, 3, 1)
	ctx := context.Background()
	cl := g.client()
	defer cl.Close()
	data := testkit.SeededBytes(300_000, 22)
	testkit.WriteFile(t, cl, "/before", data, 1)

	w := startWriters(g, 4, "w")
	for round := 0; round < 2; round++ {
		w.waitAcked(t, w.count()+150)
		old := g.leader()
		g.kill(old)
		w.waitAcked(t, w.count()+150) // through the failover
		if l := g.leader(); l == old {
			t.Fatalf("member %s still leads after kill -9", old.id)
		}
		g.startMember(old, g.peers()) // back as a follower
	}
	acked := w.finish()
	t.Logf("%d commits acknowledged, %d of unknown outcome, %d failed otherwise", len(acked), w.unknown, len(w.other))

	tx := cl.Begin()
	ents, err := tx.ReadDir(ctx, "/")
	if err != nil {
		t.Fatal(err)
	}
	tx.Abort(ctx)
	have := map[string]bool{}
	for _, e := range ents {
		have[e.Name] = true
	}
	if n := missing(acked, have); n > 0 {
		t.Fatalf("the leader lacks %d of %d acknowledged commits", n, len(acked))
	}
	g.waitLive(1) // the datanode registered with the last leader
	if got := testkit.ReadFile(t, cl, "/before"); !bytes.Equal(got, data) {
		t.Fatalf("/before reads back %d bytes, not what was written", len(got))
	}
	testkit.FsckClean(t, cl)

	g.waitCaughtUp()
	g.stopMembers()
	for _, m := range g.members {
		if n := missing(acked, rootNames(t, m)); n > 0 {
			t.Errorf("member %s's database lacks %d of %d acknowledged commits", m.id, n, len(acked))
		}
	}
}
