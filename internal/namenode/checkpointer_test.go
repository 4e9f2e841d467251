package namenode

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/plasmafs/plasma/internal/meta"
)

// applyStore is a meta.Store that records what is applied to it.
type applyStore struct {
	mu      sync.Mutex
	applied [][]*meta.Change
	fail    error
}

func (s *applyStore) Load(context.Context) (*meta.Snapshot, error) { return &meta.Snapshot{}, nil }
func (s *applyStore) Close() error                                 { return nil }
func (s *applyStore) Apply(_ context.Context, cs []*meta.Change) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return s.fail
	}
	s.applied = append(s.applied, cs)
	return nil
}

// TestCheckpointerOrder: every queued batch reaches the store once, in
// log order, each store transaction ending with the last record it holds;
// wait returns once the store holds the record asked for; stop applies
// what is still queued.
func TestCheckpointerOrder(t *testing.T) {
	st := &applyStore{}
	c := newCheckpointer(st, 10, func(err error) { t.Errorf("fatal: %v", err) })
	for seq := uint64(11); seq <= 400; seq++ {
		c.queue(seq, []*meta.Change{{InoLimit: seq}})
		if seq == 300 {
			c.wait(300)
			st.mu.Lock()
			last := st.applied[len(st.applied)-1]
			st.mu.Unlock()
			if got := last[len(last)-1].LogSeq; got < 300 {
				t.Fatalf("wait(300) returned with the store at record %d", got)
			}
		}
	}
	c.stop()
	next := uint64(11)
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
		t.Fatalf("records 11..%d applied, want through 400", next-1)
	}
}

// TestCheckpointerStoreFailure: a store error stops the namenode (fatal)
// and releases whoever waits.
func TestCheckpointerStoreFailure(t *testing.T) {
	boom := errors.New("disk gone")
	st := &applyStore{fail: boom}
	fatal := make(chan error, 1)
	c := newCheckpointer(st, 0, func(err error) { fatal <- err })
	c.queue(1, []*meta.Change{{InoLimit: 1}})
	c.wait(1)
	if err := <-fatal; !errors.Is(err, boom) {
		t.Fatalf("fatal got %v", err)
	}
	c.stop()
}
