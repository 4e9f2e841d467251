package supervisor

import "time"

// RestartPolicy is how long the cluster supervisor waits before it
// restarts a member that died. A member that dies soon after its start is
// probably crashing in a loop: each such death doubles the delay, from Min
// up to Max. A member that ran at least Stable before it died ran well:
// its death is not part of a loop, and the delay starts over at Min.
type RestartPolicy struct {
	Min, Max, Stable time.Duration
}

// DefaultRestartPolicy is the policy of 'cluster up' (-restart-reset sets
// Stable). A crash loop dies within a second or two; a member that ran for
// 10 seconds was working (it was killed, or hit a fault it may not hit
// again), and making it wait up to 30 seconds would keep it down for longer
// than it ran.
var DefaultRestartPolicy = RestartPolicy{Min: 250 * time.Millisecond, Max: 30 * time.Second, Stable: 10 * time.Second}

// restartBackoff follows one member under a policy: when it started, and
// the delay before its next restart.
type restartBackoff struct {
	policy  RestartPolicy
	now     func() time.Time // the clock (time.Now; a test's own in tests)
	started time.Time
	delay   time.Duration // the delay after the next short run
}

func newRestartBackoff(p RestartPolicy, now func() time.Time) *restartBackoff {
	return &restartBackoff{policy: p, now: now, delay: p.Min}
}

// started notes that the member has just started.
func (b *restartBackoff) start() { b.started = b.now() }

// ran is how long the member has run since its last start.
func (b *restartBackoff) ran() time.Duration { return b.now().Sub(b.started) }

// died returns the delay before restarting the member that has just died.
func (b *restartBackoff) died() time.Duration {
	if b.ran() >= b.policy.Stable {
		b.delay = b.policy.Min
	}
	return b.next()
}

// startFailed returns the delay before trying again to start the member,
// which could not be started.
func (b *restartBackoff) startFailed() time.Duration { return b.next() }

// next returns the current delay and doubles the one after it.
func (b *restartBackoff) next() time.Duration {
	d := b.delay
	b.delay = min(2*b.delay, b.policy.Max)
	return d
}
