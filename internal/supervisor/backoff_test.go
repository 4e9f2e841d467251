package supervisor

import (
	"testing"
	"time"
)

// fakeClock is a clock that a test moves by hand.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

// TestRestartBackoffStartsOver (issue 19 item 10): quick deaths double the
// restart delay up to its maximum; a run of at least the policy's stable
// time brings it back to the minimum, and it grows again from there.
func TestRestartBackoffStartsOver(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1e9, 0)}
	p := RestartPolicy{Min: 250 * time.Millisecond, Max: 30 * time.Second, Stable: 10 * time.Second}
	b := newRestartBackoff(p, clock.now)
	run := func(d time.Duration) time.Duration {
		b.start()
		clock.advance(d)
		return b.died()
	}
	want := []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second,
		8 * time.Second, 16 * time.Second, 30 * time.Second, 30 * time.Second}
	for i, w := range want {
		if got := run(time.Second); got != w {
			t.Fatalf("death %d after a short run: delay %v, want %v", i+1, got, w)
		}
	}
	if got := run(p.Stable); got != p.Min {
		t.Fatalf("death after running %v (the stable time): delay %v, want %v", p.Stable, got, p.Min)
	}
	if got := run(time.Second); got != 2*p.Min {
		t.Fatalf("quick death after the reset: delay %v, want %v", got, 2*p.Min)
	}
	if got := b.startFailed(); got != 4*p.Min {
		t.Fatalf("failed start: delay %v, want %v", got, 4*p.Min)
	}
	if got := run(time.Hour); got != p.Min {
		t.Fatalf("death after a long run: delay %v, want %v", got, p.Min)
	}
}
