package datanode

import (
	"testing"
	"time"
)

// TestCopyLimiterPaces: the bucket lets a burst through at once, then
// one block per block's worth of rate, and refills while idle only up to
// its burst.
func TestCopyLimiterPaces(t *testing.T) {
	const block = 1 << 20
	l := newCopyLimiter(block, 2*block) // one block a second, two held
	t0 := l.last
	for i := range 2 {
		if d := l.take(block, t0); d != 0 {
			t.Fatalf("block %d of the burst waits %v", i, d)
		}
	}
	if d := l.take(block, t0); d != time.Second {
		t.Fatalf("third block at once waits %v, want 1s", d)
	}
	if d := l.take(block, t0); d != 2*time.Second {
		t.Fatalf("fourth block at once waits %v, want 2s (after the third)", d)
	}
	// An hour idle fills the bucket to its burst, no more.
	t1 := t0.Add(time.Hour)
	for i := range 2 {
		if d := l.take(block, t1); d != 0 {
			t.Fatalf("block %d after an idle hour waits %v", i, d)
		}
	}
	if d := l.take(block, t1); d != time.Second {
		t.Fatalf("third block after an idle hour waits %v, want 1s", d)
	}
	if newCopyLimiter(0, block) != nil || !(*copyLimiter)(nil).wait(block, nil) {
		t.Fatal("rate 0 must not bound copies")
	}
}
