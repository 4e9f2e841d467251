package namenode

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/plasmafs/plasma/internal/meta"
)

// flakyStore fails its first failures Applies as unavailable (a
// PostgreSQL server stopped), then applies.
type flakyStore struct {
	applyStore
	failures int
}

func (s *flakyStore) Apply(ctx context.Context, cs []*meta.Change) error {
	s.mu.Lock()
	if s.failures > 0 {
		s.failures--
		s.mu.Unlock()
		return fmt.Errorf("connect: %w", meta.ErrUnavailable)
	}
	s.mu.Unlock()
	return s.applyStore.Apply(ctx, cs)
}

// TestCheckpointerRetriesUnavailableStore: a store that is unavailable is
// retried, not fatal: the batches logged meanwhile reach it once it
// answers again.
func TestCheckpointerRetriesUnavailableStore(t *testing.T) {
	st := &flakyStore{failures: 3}
	l, _ := testLog(t, 1<<20)
	c := newCheckpointer(l, 1<<30, st, 0, func(err error) { t.Errorf("fatal: %v", err) }, nil)
	for i := uint64(1); i <= 5; i++ {
		if err := c.append([]*meta.Change{{InoLimit: i}}); err != nil {
			t.Fatal(err)
		}
		if err := c.sync(); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.wait(5); err != nil {
		t.Fatalf("wait for the store to hold every batch: %v", err)
	}
	if got := st.holds(); got != 5 {
		t.Fatalf("the store holds the log through %d, want 5", got)
	}
	c.close()
}

// TestCheckpointerStopWhileUnavailable: stopping while the store is
// unavailable ends the retries without a fatal error; the log keeps the
// batch.
func TestCheckpointerStopWhileUnavailable(t *testing.T) {
	st := &flakyStore{failures: 1 << 30}
	l, path := testLog(t, 1<<20)
	c := newCheckpointer(l, 1<<30, st, 0, func(err error) { t.Errorf("fatal: %v", err) }, nil)
	if err := c.append([]*meta.Change{{InoLimit: 1}}); err != nil {
		t.Fatal(err)
	}
	if err := c.sync(); err != nil {
		t.Fatal(err)
	}
	// Wait until it has failed at least once (it is then retrying).
	deadline := time.Now().Add(time.Minute)
	for {
		st.mu.Lock()
		n := st.failures
		st.mu.Unlock()
		if n < 1<<30 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the checkpointer never tried the store")
		}
		time.Sleep(time.Millisecond)
	}
	c.close()
	if err := c.wait(1); !errors.Is(err, errCheckpointStopped) {
		t.Fatalf("wait after stopping: %v", err)
	}
	if got := logged(t, path); len(got) != 1 {
		t.Fatalf("the log holds %v, want record 1", got)
	}
}
