package namenode

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/plasmafs/plasma/internal/commitlog"
	"github.com/plasmafs/plasma/internal/meta"
)

// applyStore is a meta.Store (and meta.Syncer) that records what is
// applied to it and when it is synced. Apply waits while gate is set and
// open, and fails with fail.
type applyStore struct {
	mu      sync.Mutex
	applied [][]*meta.Change
	events  []string // "apply N" (N: the LogSeq recorded) and "sync"
	synced  uint64   // the last log record the store held at its last sync
	fail    error
	gate    chan struct{}
}

func (s *applyStore) Load(context.Context) (*meta.Snapshot, error) { return &meta.Snapshot{}, nil }
func (s *applyStore) Close() error                                 { return nil }
func (s *applyStore) Apply(_ context.Context, cs []*meta.Change) error {
	if s.gate != nil {
		<-s.gate
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return s.fail
	}
	s.applied = append(s.applied, cs)
	s.events = append(s.events, "apply")
	return nil
}

func (s *applyStore) Sync() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, "sync")
	if len(s.applied) > 0 {
		last := s.applied[len(s.applied)-1]
		s.synced = last[len(last)-1].LogSeq
	}
	return nil
}

// holds returns the last log record the store holds.
func (s *applyStore) holds() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.applied) == 0 {
		return 0
	}
	last := s.applied[len(s.applied)-1]
	return last[len(last)-1].LogSeq
}

// testLog opens a commit log of size bytes in a temporary directory.
func testLog(t *testing.T, size int64) (*commitlog.Log, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "nn.log")
	l, err := commitlog.Open(path, size, 1, func(uint64, []byte) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	return l, path
}

// logged returns the records a commit log at path holds.
func logged(t *testing.T, path string) []uint64 {
	t.Helper()
	var seqs []uint64
	l, err := commitlog.Open(path, 1<<20, 1, func(seq uint64, _ []byte) error {
		seqs = append(seqs, seq)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	return seqs
}

// TestCheckpointerOrder: every appended batch reaches the store once, in
// log order, each store transaction ending with the last record it holds;
// wait returns once the store holds the record asked for; stop applies
// what is still queued.
func TestCheckpointerOrder(t *testing.T) {
	st := &applyStore{}
	l, _ := testLog(t, 1<<20)
	c := newCheckpointer(l, 1<<30, st, 0, func(err error) { t.Errorf("fatal: %v", err) }, nil)
	for i := uint64(1); i <= 400; i++ {
		if err := c.append([]*meta.Change{{InoLimit: i}}); err != nil {
			t.Fatal(err)
		}
		if i == 300 {
			if err := c.wait(300); err != nil {
				t.Fatal(err)
			}
			if got := st.holds(); got < 300 {
				t.Fatalf("wait(300) returned with the store at record %d", got)
			}
		}
	}
	if err := c.close(); err != nil {
		t.Fatal(err)
	}
	next := uint64(1)
	for _, tx := range st.applied {
		for _, ch := range tx[:len(tx)-1] {
			if ch.InoLimit != next {
				t.Fatalf("batch of record %d applied where %d was due", ch.InoLimit, next)
			}
			next++
		}
		if tx[len(tx)-1].LogSeq != next-1 {
			t.Fatalf("store transaction ends with LogSeq %d after record %d", tx[len(tx)-1].LogSeq, next-1)
		}
	}
	if next != 401 {
		t.Fatalf("records 1..%d applied, want through 400 (stop applies what is queued)", next-1)
	}
}

// TestCheckpointerStopDrains: batches appended just before stop (fewer
// than make the checkpointer skip its gathering pause) are in the store
// when stop returns.
func TestCheckpointerStopDrains(t *testing.T) {
	st := &applyStore{}
	l, _ := testLog(t, 1<<20)
	c := newCheckpointer(l, 1<<30, st, 0, func(err error) { t.Errorf("fatal: %v", err) }, nil)
	for i := uint64(1); i <= 3; i++ {
		if err := c.append([]*meta.Change{{InoLimit: i}}); err != nil {
			t.Fatal(err)
		}
	}
	c.close()
	if got := st.holds(); got != 3 {
		t.Fatalf("after stop the store holds through record %d, want 3", got)
	}
}

// TestCheckpointerRestartsLogAfterStore: an append to a full log starts
// the log over only once the store holds every logged batch and has been
// synced; below the limit the log stays as it is. (A restarted log's old
// records stay on disk until overwritten; the chain a restart replays is
// what counts.) The restart is the append's, not the sync's: a sync may
// run while the next batch is appended.
func TestCheckpointerRestartsLogAfterStore(t *testing.T) {
	st := &applyStore{gate: make(chan struct{})}
	l, path := testLog(t, 1<<20)
	c := newCheckpointer(l, 4096, st, 0, func(err error) { t.Errorf("fatal: %v", err) }, nil)
	big := make([]uint64, 100) // a record of some hundred bytes
	for i := uint64(1); i <= 3; i++ {
		if err := c.append([]*meta.Change{{InoLimit: i, DelInodes: big}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.sync(); err != nil {
		t.Fatal(err)
	}
	if got := logged(t, path); len(got) != 3 {
		t.Fatalf("a sync below the limit left records %v, want 1..3", got)
	}
	var last uint64
	for l.Used() < 4096 {
		if err := c.append([]*meta.Change{{DelInodes: big}}); err != nil {
			t.Fatal(err)
		}
		last++
	}
	last += 3
	if err := c.sync(); err != nil {
		t.Fatal(err)
	}
	appended := make(chan error, 1)
	go func() { appended <- c.append([]*meta.Change{{InoLimit: 1}}) }()
	select {
	case err := <-appended:
		t.Fatalf("append to a full log returned (%v) before the store held its batches", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(st.gate) // the store applies
	if err := <-appended; err != nil {
		t.Fatal(err)
	}
	if got := st.holds(); got < last {
		t.Fatalf("log started over with the store at record %d of %d", got, last)
	}
	st.mu.Lock()
	synced := st.synced
	st.mu.Unlock()
	if synced < last {
		t.Fatalf("log started over with the store synced through record %d of %d", synced, last)
	}
	if err := c.log.Sync(); err != nil {
		t.Fatal(err)
	}
	if got := logged(t, path); len(got) != 1 || got[0] != last+1 {
		t.Fatalf("the full log was not started over: it holds %v, want only record %d", got, last+1)
	}
	c.close()
}

// TestCheckpointerStoreFailure: a store error stops the namenode (fatal)
// and releases whoever waits, with an error; the log keeps what the store
// lacks, even when full (it is not started over), so a restart replays it;
// stop returns.
func TestCheckpointerStoreFailure(t *testing.T) {
	boom := errors.New("disk gone")
	st := &applyStore{fail: boom}
	fatal := make(chan error, 1)
	l, path := testLog(t, 1<<20)
	c := newCheckpointer(l, 64, st, 0, func(err error) { fatal <- err }, nil)
	for i := uint64(1); i <= 3; i++ {
		if err := c.append([]*meta.Change{{InoLimit: i}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.wait(1); !errors.Is(err, errCheckpointStopped) {
		t.Fatalf("wait after a store error: %v", err)
	}
	select {
	case err := <-fatal:
		if !errors.Is(err, boom) {
			t.Fatalf("fatal got %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a store error did not stop the namenode (no fatal call)")
	}
	if err := c.append([]*meta.Change{{InoLimit: 4}}); err == nil {
		t.Fatal("append to a full log succeeded although the store lacks its batches")
	}
	c.close()
	if got := logged(t, path); len(got) != 3 {
		t.Fatalf("after a store error the log holds %v, want records 1..3", got)
	}
}
