package namenode

import (
	"slices"
	"testing"
	"time"
)

// TestCommitterUnsyncedDataWaitsForSync: an async commit whose data the
// datanodes have not synced (datasync.go) is not written while a sync is
// in flight (that sync's log fsync would make it durable without its
// datanodes' sync), but right after it; a commit without such data is
// written at once meanwhile. Fails without the committer's gate.
func TestCommitterUnsyncedDataWaitsForSync(t *testing.T) {
	s := &slowSyncStore{fakeStore: &fakeStore{}, entered: make(chan struct{}), gate: make(chan struct{})}
	c := newCommitter(s, time.Hour, 1000)
	first := make(chan struct{})
	go func() {
		c.submit(req(s.fakeStore, "first", false), nil)
		close(first)
	}()
	<-s.entered // the first commit's sync is in flight
	// A plain async commit is written and answered during the sync.
	c.submit(req(s.fakeStore, "plain", true), nil)
	if got := s.got(); !slices.Contains(got, "answer plain") {
		t.Fatalf("a plain async commit was not answered during a sync: %q", got)
	}
	r := req(s.fakeStore, "unsynced", true)
	r.dataNodes = map[uint32]*conn{1: nil}
	done := make(chan struct{})
	go func() {
		c.submit(r, nil)
		close(done)
	}()
	// It must not get through while the sync is held. (Bounded wait for
	// the failure case; the passing case never depends on it.)
	select {
	case <-done:
		t.Fatalf("a commit with unsynced data was written during a sync: %q", s.got())
	case <-time.After(300 * time.Millisecond):
	}
	close(s.gate)
	<-first
	<-done
	got := s.got()
	sync, answer := slices.Index(got, "sync"), slices.Index(got, "answer unsynced")
	if sync < 0 || answer < sync {
		t.Fatalf("the commit with unsynced data was answered before the sync in flight ended: %q", got)
	}
}
