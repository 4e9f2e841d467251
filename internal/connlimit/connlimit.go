// Package connlimit is the admission control every server of the project
// shares. Listener is the one accept path: it survives running out of file
// descriptors (backing off, never ending the server), bounds the
// connections that have not finished their handshake (in total and per
// source address, the longest waiting closed first to make room) and the
// open ones. Limiter is what follows the handshake at the namenode and the
// datanodes: each user has a limit of its own, and privileged identities
// (daemons, superusers) may go past MaxConns (as far as the Listener's
// MaxOpen), so a flood of user connections never locks out the
// administrator or a restarting daemon.
// Budget bounds the memory peers' requests may pin while they arrive.
package connlimit

import (
	"fmt"
	"net"
	"sync"
	"time"
)

// Limiter counts established connections per user. Its zero value is
// not usable: use New.
type Limiter struct {
	maxConns, perUser int

	mu          sync.Mutex
	established int
	ofUser      map[string]int
}

// New returns a limiter of maxConns connections (privileged ones may go
// past it) and perUser per user.
func New(maxConns, perUser int) *Limiter {
	return &Limiter{maxConns: maxConns, perUser: perUser, ofUser: map[string]int{}}
}

// Source names a connection's peer address (the IP, without the port).
func Source(nc net.Conn) string {
	if a, ok := nc.RemoteAddr().(*net.TCPAddr); ok {
		return a.IP.String()
	}
	return nc.RemoteAddr().String()
}

// Admit admits an authenticated connection of user, or says why not.
func (l *Limiter) Admit(user string, privileged bool) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case !privileged && l.established >= l.maxConns:
		return fmt.Errorf("the server has its maximum of %d connections", l.maxConns)
	case !privileged && l.ofUser[user] >= l.perUser:
		return fmt.Errorf("user %s has its maximum of %d connections", user, l.perUser)
	}
	l.established++
	l.ofUser[user]++
	return nil
}

// Closed forgets an established connection of user.
func (l *Limiter) Closed(user string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.established--
	if l.ofUser[user]--; l.ofUser[user] <= 0 {
		delete(l.ofUser, user)
	}
}

// Backoff paces an accept loop after errors: Wait sleeps (5 ms doubling to
// 1 s) unless stop closes first, and reports whether to go on.
type Backoff struct{ d time.Duration }

// Wait waits before the next accept after an error.
func (b *Backoff) Wait(stop <-chan struct{}) bool {
	b.d = min(max(2*b.d, 5*time.Millisecond), time.Second)
	select {
	case <-stop:
		return false
	case <-time.After(b.d):
		return true
	}
}

// Reset starts the backoff over after a successful accept.
func (b *Backoff) Reset() { b.d = 0 }
