package namenode

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/plasmafs/plasma/internal/meta"
)

// fakeStore records what the committer does, in order.
type fakeStore struct {
	mu       sync.Mutex
	events   []string
	pending  []*meta.Change
	writeErr error
	fatals   []error
	// If set, the first write signals entered and waits for gate.
	entered, gate chan struct{}
	once          sync.Once
	synced        chan struct{} // if set, signalled after each sync
}

func (f *fakeStore) log(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, fmt.Sprintf(format, args...))
}

func (f *fakeStore) got() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.events)
}

func (f *fakeStore) internal() []*meta.Change {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.pending
	f.pending = nil
	return out
}

func (f *fakeStore) write(changes []*meta.Change) error {
	if f.entered != nil {
		f.once.Do(func() {
			close(f.entered)
			<-f.gate
		})
	}
	if f.writeErr != nil {
		return f.writeErr
	}
	f.log("write %d", len(changes))
	return nil
}

func (f *fakeStore) applied(batch []*commitReq) { f.log("apply %d", len(batch)) }

func (f *fakeStore) sync() error {
	f.log("sync")
	if f.synced != nil {
		f.synced <- struct{}{}
	}
	return nil
}

func (f *fakeStore) unsynced() {}

func (f *fakeStore) fatal(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fatals = append(f.fatals, err)
}

// req makes a commit request whose answer is logged as "answer name".
func req(f *fakeStore, name string, async bool) *commitReq {
	return &commitReq{change: &meta.Change{}, async: async, reply: func(error) { f.log("answer %s", name) }}
}

// TestCommitterDurableAnsweredAfterSync: a durable commit is written,
// applied and synced before it is answered; async commits in the same
// batch are answered before the sync.
func TestCommitterDurableAnsweredAfterSync(t *testing.T) {
	f := &fakeStore{}
	c := newCommitter(f, time.Hour, 1000)
	c.q <- req(f, "a1", true)
	c.q <- req(f, "d", false)
	c.submit(req(f, "a2", true), nil)
	want := []string{"write 3", "apply 3", "answer a1", "answer a2", "sync", "answer d"}
	if got := f.got(); !slices.Equal(got, want) {
		t.Fatalf("events %q, want %q", got, want)
	}
}

// TestCommitterAsyncNoSync: async commits alone are answered without a
// sync until syncCommits of them were written; a barrier syncs.
func TestCommitterAsyncNoSync(t *testing.T) {
	f := &fakeStore{}
	c := newCommitter(f, time.Hour, 3)
	c.submit(req(f, "a1", true), nil)
	c.submit(req(f, "a2", true), nil)
	if got, want := f.got(), []string{"write 1", "apply 1", "answer a1", "write 1", "apply 1", "answer a2"}; !slices.Equal(got, want) {
		t.Fatalf("events %q, want %q", got, want)
	}
	c.submit(req(f, "a3", true), nil) // the third: synced
	if got := f.got(); got[len(got)-1] != "sync" {
		t.Fatalf("no sync after syncCommits async commits: %q", got)
	}
	f.events = nil
	c.submit(req(f, "a4", true), nil)
	barrier := &commitReq{reply: func(error) { f.log("answer barrier") }}
	c.submit(barrier, nil)
	want := []string{"write 1", "apply 1", "answer a4", "sync", "answer barrier"}
	if got := f.got(); !slices.Equal(got, want) {
		t.Fatalf("events %q, want %q", got, want)
	}
}

// TestCommitterGroupCommit: requests submitted while a batch is being
// written go together into the next batch, written by the goroutine that
// was writing, which then syncs both batches at once; the submitters
// return at once.
func TestCommitterGroupCommit(t *testing.T) {
	f := &fakeStore{entered: make(chan struct{}), gate: make(chan struct{})}
	c := newCommitter(f, time.Hour, 1000)
	first := make(chan struct{})
	go func() {
		c.submit(req(f, "first", false), nil)
		close(first)
	}()
	<-f.entered // the first batch is being written, mu held
	for i := range 5 {
		c.submit(req(f, fmt.Sprint(i), false), nil) // queued, not written here
	}
	if got := f.got(); len(got) != 0 {
		t.Fatalf("written while another batch was being written: %q", got)
	}
	close(f.gate)
	<-first
	want := []string{"write 1", "apply 1", "write 5", "apply 5", "sync",
		"answer first", "answer 0", "answer 1", "answer 2", "answer 3", "answer 4"}
	if got := f.got(); !slices.Equal(got, want) {
		t.Fatalf("events %q, want %q", got, want)
	}
	if c.batches.Load() != 2 {
		t.Fatalf("%d batches, want 2", c.batches.Load())
	}
}

// TestCommitterInternalChangesJoinBatch: namenode-internal changes go
// into the next batch beside the requests, answered by nobody.
func TestCommitterInternalChangesJoinBatch(t *testing.T) {
	f := &fakeStore{pending: []*meta.Change{{}, {}}}
	c := newCommitter(f, time.Hour, 1000)
	c.submit(req(f, "a", true), nil)
	want := []string{"write 3", "apply 3", "answer a"}
	if got := f.got(); !slices.Equal(got, want) {
		t.Fatalf("events %q, want %q", got, want)
	}
}

// TestCommitterDirectAnswer: the submitter's own request is answered on
// its goroutine (direct), others' through their reply.
func TestCommitterDirectAnswer(t *testing.T) {
	f := &fakeStore{}
	c := newCommitter(f, time.Hour, 1000)
	self, other := &conn{}, &conn{}
	mk := func(owner *conn, name string) *commitReq {
		r := req(f, name, false)
		r.owner = owner
		r.direct = func() { f.log("direct %s", name) }
		return r
	}
	c.q <- mk(other, "theirs")
	c.submit(mk(self, "mine"), self)
	want := []string{"write 2", "apply 2", "sync", "answer theirs", "direct mine"}
	if got := f.got(); !slices.Equal(got, want) {
		t.Fatalf("events %q, want %q", got, want)
	}
}

// TestCommitterTimerSyncs: async commits left unsynced are synced by the
// background goroutine's timer.
func TestCommitterTimerSyncs(t *testing.T) {
	f := &fakeStore{synced: make(chan struct{}, 1)}
	c := newCommitter(f, time.Millisecond, 1000)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		c.run(stop)
		close(done)
	}()
	defer func() {
		close(stop)
		<-done
	}()
	c.submit(req(f, "a", true), nil)
	<-f.synced // would hang (test timeout) without the timer's sync
	if got := f.got(); got[len(got)-1] != "sync" {
		t.Fatalf("events %q", got)
	}
}

// TestCommitterWriteErrorStops: a failed write answers nothing, reports
// the error once and writes nothing more.
func TestCommitterWriteErrorStops(t *testing.T) {
	f := &fakeStore{writeErr: errors.New("disk gone")}
	c := newCommitter(f, time.Hour, 1000)
	c.submit(req(f, "a", false), nil)
	f.writeErr = nil
	c.submit(req(f, "b", false), nil)
	if got := f.got(); len(got) != 0 {
		t.Fatalf("events after a failed write: %q", got)
	}
	if len(f.fatals) != 1 || !strings.Contains(f.fatals[0].Error(), "disk gone") {
		t.Fatalf("fatal errors %v", f.fatals)
	}
	if !c.failed.Load() {
		t.Fatal("committer not stopped")
	}
}
