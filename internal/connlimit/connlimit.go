// Package connlimit is the admission control the namenode and the
// datanodes share: connections still in their handshake count against the
// limit and against a small per-source-address cap, so idle or slow peers
// cannot hold the file descriptors legitimate clients need; after the
// handshake each user has a limit of its own. Privileged identities
// (daemons, superusers) may go Reserve past MaxConns, so a flood of user
// connections never locks out the administrator or a restarting daemon.
// It also holds the accept loop's backoff: running out of file
// descriptors must slow a server down, never end it.
package connlimit

import (
	"fmt"
	"net"
	"sync"
	"time"
)

// Limiter counts connections. Its zero value is not usable: use New.
type Limiter struct {
	maxConns, perUser, perSource, reserve int

	mu          sync.Mutex
	established int
	handshaking int
	fromSource  map[string]int
	ofUser      map[string]int
}

// New returns a limiter of maxConns connections (Reserve more for
// privileged ones), perUser per user and perSource handshakes per address.
func New(maxConns, perUser, perSource, reserve int) *Limiter {
	return &Limiter{maxConns: maxConns, perUser: perUser, perSource: perSource, reserve: reserve,
		fromSource: map[string]int{}, ofUser: map[string]int{}}
}

// Source names a connection's peer address (the IP, without the port).
func Source(nc net.Conn) string {
	if a, ok := nc.RemoteAddr().(*net.TCPAddr); ok {
		return a.IP.String()
	}
	return nc.RemoteAddr().String()
}

// StartHandshake admits a new connection from src into its handshake, or
// says why not.
func (l *Limiter) StartHandshake(src string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.established+l.handshaking >= l.maxConns+l.reserve {
		return fmt.Errorf("connection limit reached (%d)", l.maxConns)
	}
	if l.fromSource[src] >= l.perSource {
		return fmt.Errorf("too many connections in their handshake from %s (limit %d)", src, l.perSource)
	}
	l.handshaking++
	l.fromSource[src]++
	return nil
}

// EndHandshake ends the handshake StartHandshake admitted. If it succeeded
// (ok), the connection of user is admitted as established, or refused
// with the reason; a refused or failed one is forgotten.
func (l *Limiter) EndHandshake(src string, ok bool, user string, privileged bool) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.handshaking--
	if l.fromSource[src]--; l.fromSource[src] <= 0 {
		delete(l.fromSource, src)
	}
	if !ok {
		return nil
	}
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
