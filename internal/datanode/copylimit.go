package datanode

// The bandwidth of re-replication: a datanode sending blocks for the
// namenode's copies (DataReplicate) paces them with a token bucket shared
// by all its connections, Config.CopyRate bytes a second with a burst of
// a few blocks, so that the copies after a datanode's death leave user
// reads and writes their share of the disk and network. User traffic is
// never paced.

import (
	"sync"
	"sync/atomic"
	"time"
)

// copyBurstBlocks is how many blocks the bucket holds when full.
const copyBurstBlocks = 4

// copyLimiter is the token bucket. A nil one lets everything through.
type copyLimiter struct {
	rate  float64 // bytes a second
	burst float64 // bytes
	mu    sync.Mutex
	avail float64   // bytes; negative: reserved by waiting senders
	last  time.Time // when avail was last brought up to date
	// waited is the time senders spent waiting, in nanoseconds (metrics).
	waited atomic.Int64
}

// newCopyLimiter returns a bucket of rate bytes a second holding burst
// bytes, full; nil for rate 0 (no limit).
func newCopyLimiter(rate int64, burst int) *copyLimiter {
	if rate <= 0 {
		return nil
	}
	return &copyLimiter{rate: float64(rate), burst: float64(burst), avail: float64(burst), last: time.Now()}
}

// take reserves n bytes and returns how long the caller must wait before
// sending them (0: at once).
func (l *copyLimiter) take(n int, now time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.avail = min(l.burst, l.avail+now.Sub(l.last).Seconds()*l.rate)
	l.last = now
	l.avail -= float64(n)
	if l.avail >= 0 {
		return 0
	}
	return time.Duration(-l.avail / l.rate * float64(time.Second))
}

// wait blocks until n bytes may be sent; false if stop closed first.
func (l *copyLimiter) wait(n int, stop <-chan struct{}) bool {
	if l == nil {
		return true
	}
	d := l.take(n, time.Now())
	if d <= 0 {
		return true
	}
	l.waited.Add(int64(d))
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-stop:
		return false
	}
}

// waitedSeconds is the time senders spent waiting so far.
func (l *copyLimiter) waitedSeconds() float64 {
	if l == nil {
		return 0
	}
	return time.Duration(l.waited.Load()).Seconds()
}
