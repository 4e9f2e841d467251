package connlimit

import (
	"fmt"
	"sync"
	"time"
)

// Budget is a number of bytes a server's connections share for what their
// peers send and the server has not yet used (requests arriving in
// pieces): a connection acquires bytes before its buffer grows and
// releases them once the request is done with. Peers that start large
// requests and never finish them can pin no more than the budget.
type Budget struct {
	total int
	wait  time.Duration

	mu      sync.Mutex
	free    int
	changed chan struct{} // closed and replaced when bytes are released
}

// NewBudget returns a budget of total bytes; Acquire waits at most wait
// for bytes to be released.
func NewBudget(total int, wait time.Duration) *Budget {
	return &Budget{total: total, wait: wait, free: total, changed: make(chan struct{})}
}

// Acquire takes n bytes, waiting for others to release them if need be,
// and fails once it has waited too long (the caller gives up its request
// and its connection, releasing what it holds).
func (b *Budget) Acquire(n int) error {
	if n > b.total {
		return fmt.Errorf("request of %d bytes larger than the server's budget of %d", n, b.total)
	}
	var timeout <-chan time.Time
	for {
		b.mu.Lock()
		if b.free >= n {
			b.free -= n
			b.mu.Unlock()
			return nil
		}
		changed := b.changed
		b.mu.Unlock()
		if timeout == nil {
			t := time.NewTimer(b.wait)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-changed:
		case <-timeout:
			return fmt.Errorf("the server's memory for requests in flight (%d MiB) stayed taken for %v: try again", b.total>>20, b.wait)
		}
	}
}

// Release gives back n bytes taken by Acquire.
func (b *Budget) Release(n int) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	b.free += n
	close(b.changed)
	b.changed = make(chan struct{})
	b.mu.Unlock()
}
