package namenode

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

// slowSyncStore is a fakeStore whose first sync is in flight until gate
// is closed (entered tells it started); each sync is logged as "sync"
// when it completes.
type slowSyncStore struct {
	*fakeStore
	entered, gate chan struct{}
	once          sync.Once
}

func (s *slowSyncStore) sync() error {
	s.once.Do(func() {
		close(s.entered)
		<-s.gate
	})
	s.log("sync")
	return nil
}

// count returns how many events equal e.
func count(events []string, e string) int {
	n := 0
	for _, x := range events {
		if x == e {
			n++
		}
	}
	return n
}

// TestCommitterCommitsDuringSyncShareNextSync: durable commits that
// arrive while a sync is in flight are written at once (not after the
// sync), none is answered before a sync that completed after its write,
// and all of them are covered by exactly one following sync.
func TestCommitterCommitsDuringSyncShareNextSync(t *testing.T) {
	const n = 6
	s := &slowSyncStore{fakeStore: &fakeStore{}, entered: make(chan struct{}), gate: make(chan struct{})}
	c := newCommitter(s, time.Hour, 1000)
	first := make(chan struct{})
	go func() {
		c.submit(req(s.fakeStore, "first", false), nil)
		close(first)
	}()
	<-s.entered // the first commit's sync is in flight
	released := false
	release := func() {
		if !released {
			released = true
			close(s.gate)
			<-first
		}
	}
	defer release()
	for i := range n {
		c.submit(req(s.fakeStore, fmt.Sprint(i), false), nil) // returns without waiting for the sync
	}
	// They are written while the sync is in flight, so the next sync can
	// start as soon as this one ends.
	for deadline := time.Now().Add(10 * time.Second); count(s.got(), "write 1") < 1+n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("commits arriving during a sync were not written during it: %q", s.got())
		}
	}
	if got := s.got(); slices.Contains(got, "sync") || len(got) != 2*(1+n) {
		t.Fatalf("before the first sync completed: %q, want only the writes and applies", got)
	}
	release()
	got := s.got()
	if syncs := count(got, "sync"); syncs != 2 {
		t.Fatalf("%d syncs for one commit and %d arriving during its sync, want 2: %q", syncs, n, got)
	}
	first1 := slices.Index(got, "sync")
	second := first1 + 1 + slices.Index(got[first1+1:], "sync")
	if i := slices.Index(got, "answer first"); i < first1 {
		t.Fatalf("first answered before its sync: %q", got)
	}
	for i := range n {
		if j := slices.Index(got, fmt.Sprintf("answer %d", i)); j < second {
			t.Fatalf("commit %d answered (at %d) before the sync after its write (at %d): %q", i, j, second, got)
		}
	}
}

// TestCommitterGathersLastSyncsConnections: after one sync answered the
// durable commits of two connections, the next commit of one of them
// waits (within the bound) for the other's before a sync starts, so the
// two share one sync again instead of taking one each.
func TestCommitterGathersLastSyncsConnections(t *testing.T) {
	f := &fakeStore{}
	c := newCommitter(f, time.Hour, 1000)
	a, b := &conn{}, &conn{}
	mk := func(owner *conn, name string) *commitReq {
		r := req(f, name, false)
		r.owner = owner
		return r
	}
	c.q <- mk(a, "a1")
	c.submit(mk(b, "b1"), nil) // one batch, one sync
	if got := count(f.got(), "sync"); got != 1 {
		t.Fatalf("%d syncs for the first batch: %q", got, f.got())
	}
	// Syncs that take an hour: the wait before the next is bounded by
	// half of that, so here it ends only when b's commit arrives.
	c.syncTook, c.maxGather = 2*time.Hour, time.Hour
	done := make(chan struct{})
	go func() {
		c.submit(mk(a, "a2"), nil)
		close(done)
	}()
	for deadline := time.Now().Add(10 * time.Second); count(f.got(), "write 1") < 1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("a2 not written: %q", f.got())
		}
	}
	// A sync of a2 alone would start within this window (the goroutine
	// that wrote it syncs next); none may.
	window := time.Now().Add(200 * time.Millisecond)
	for time.Now().Before(window) {
		if got := f.got(); count(got, "sync") > 1 {
			t.Fatalf("a2 synced alone while b had not committed again: %q", got)
		}
		time.Sleep(time.Millisecond)
	}
	c.submit(mk(b, "b2"), nil)
	<-done
	got := f.got()
	if n := count(got, "sync"); n != 2 {
		t.Fatalf("%d syncs, want 2 (a2 and b2 together): %q", n, got)
	}
	want := []string{"sync", "answer a2", "answer b2"}
	if tail := got[len(got)-3:]; !slices.Equal(tail, want) {
		t.Fatalf("events end with %q, want %q", tail, want)
	}
}

// TestCommitterConnWithMoreRequestsLeavesSync: a connection's goroutine
// whose connection has further requests read already writes its commit
// but leaves the sync to the background goroutine (answering through the
// connection's writer), so it goes on to those requests, whose commits
// then share the sync, instead of syncing once per request.
func TestCommitterConnWithMoreRequestsLeavesSync(t *testing.T) {
	f := &fakeStore{}
	c := newCommitter(f, time.Hour, 1000)
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		c.run(stop)
		close(done)
	}()
	defer func() {
		close(stop)
		<-done
	}()
	self := &conn{}
	self.readAhead.Store(1)
	r := req(f, "mine", false)
	r.owner, r.direct = self, func() { f.log("direct mine") }
	c.submit(r, self)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		got := f.got()
		if slices.Contains(got, "direct mine") {
			t.Fatalf("the connection's goroutine synced although its next request waited: %q", got)
		}
		if slices.Contains(got, "answer mine") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not answered: %q", got)
		}
	}
	want := []string{"write 1", "apply 1", "sync", "answer mine"}
	if got := f.got(); !slices.Equal(got, want) {
		t.Fatalf("events %q, want %q", got, want)
	}
}
