package connlimit

import (
	"container/list"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"
)

// Listener is the one accept path of every server of the project (the
// namenode, the datanodes, kv serve, the NFS bridge, the MapReduce task
// servers and web view). It keeps a server alive and reachable whatever
// its peers do:
//
//   - Accept never fails because the process is out of file descriptors
//     (or any other error but the listener's closing): it logs, waits with
//     backoff and tries again, so the server slows down instead of ending.
//   - A new connection is pending until the server calls Admit (its
//     handshake finished, or its first request arrived). Pending
//     connections are bounded in number, in total and per source address;
//     when their slots are full, the one that has waited longest is closed
//     to make room, so a peer that finishes its handshake promptly always
//     gets in however many idle ones a flood holds, from however many
//     addresses. A pending connection is closed after PendingTimeout.
//   - At most MaxOpen connections are open, fewer than the process's file
//     descriptor limit. When they are all open, the oldest pending one, or
//     else the one idle longest (SetIdle), is closed for the new one; if
//     every connection is busy, Accept waits for one to close and new
//     peers wait in the kernel's backlog.
type Listener struct {
	net.Listener
	o Options

	mu         sync.Mutex
	freed      *sync.Cond // broadcast when a connection is released or the listener closes
	closed     bool
	done       chan struct{} // closed with the listener
	open       int
	pending    list.List // of *Conn, oldest first
	idle       list.List // of *Conn, idle longest first
	fromSource map[string]int
	evicted    int       // since the last log line about it
	loggedAt   time.Time // of that line
}

// Options shape a Listener. Zero values take the defaults.
type Options struct {
	// MaxOpen bounds the open connections (default and upper bound: the
	// file descriptor limit less a margin for the server's own files).
	MaxOpen int
	// MaxPending bounds the connections not yet admitted (default 256,
	// at most half of MaxOpen).
	MaxPending int
	// PendingPerSource bounds the pending connections from one address
	// (default: MaxPending).
	PendingPerSource int
	// PendingTimeout closes a connection not admitted by then (default
	// 10 s).
	PendingTimeout time.Duration
	// Name says in log lines which server this is.
	Name string
	Log  *slog.Logger
}

// Defaults of Options.
const (
	DefaultMaxPending     = 256
	DefaultPendingTimeout = 10 * time.Second
)

// Listen wraps ln.
func Listen(ln net.Listener, o Options) *Listener {
	budget := DescriptorBudget()
	if o.MaxOpen <= 0 || o.MaxOpen > budget {
		o.MaxOpen = budget
	}
	if o.MaxPending <= 0 {
		o.MaxPending = DefaultMaxPending
	}
	o.MaxPending = max(1, min(o.MaxPending, o.MaxOpen/2))
	if o.PendingPerSource <= 0 || o.PendingPerSource > o.MaxPending {
		o.PendingPerSource = o.MaxPending
	}
	if o.PendingTimeout <= 0 {
		o.PendingTimeout = DefaultPendingTimeout
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	l := &Listener{Listener: ln, o: o, fromSource: map[string]int{}, done: make(chan struct{})}
	l.freed = sync.NewCond(&l.mu)
	return l
}

// DescriptorBudget is how many connections a process may hold: its file
// descriptor limit less a margin (an eighth, at least 64) for its files,
// its own outgoing connections and the connection being accepted.
func DescriptorBudget() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur > 1<<20 {
		return 1 << 20
	}
	n := int(rl.Cur)
	return max(16, n-max(64, n/8))
}

// Conn is a connection accepted by a Listener. Its Close gives its slot
// back; closing the connection it wraps directly would not.
type Conn struct {
	net.Conn
	l       *Listener
	src     string
	pending *list.Element // in l.pending while not admitted
	idle    *list.Element // in l.idle while idle
	timer   *time.Timer   // closes it if still pending at PendingTimeout
	gone    bool          // released (closed or evicted)
}

// NetConn returns the connection c wraps (as tls.Conn's does), for
// callers that need its concrete type (writev, peer credentials). Close
// c, not what this returns.
func (c *Conn) NetConn() net.Conn { return c.Conn }

// Close closes the connection and gives its slot back.
func (c *Conn) Close() error {
	c.l.mu.Lock()
	c.l.release(c)
	c.l.mu.Unlock()
	return c.Conn.Close()
}

// Accept waits for a connection and a slot for it. It returns an error
// only once the listener is closed.
func (l *Listener) Accept() (net.Conn, error) {
	var backoff Backoff
	for {
		nc, err := l.Listener.Accept()
		if err != nil {
			if l.isClosed() || errors.Is(err, net.ErrClosed) {
				return nil, net.ErrClosed
			}
			l.o.Log.Warn("accept failed, retrying", "server", l.o.Name, "err", err)
			if !backoff.Wait(l.done) {
				return nil, net.ErrClosed
			}
			continue
		}
		c := &Conn{Conn: nc, l: l, src: Source(nc)}
		if !l.admitPending(c) {
			nc.Close()
			return nil, net.ErrClosed
		}
		return c, nil
	}
}

// admitPending finds c a slot, closing older connections or waiting for
// one to close; false if the listener closed meanwhile.
func (l *Listener) admitPending(c *Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for l.open >= l.o.MaxOpen {
		if l.evictOldest(&l.pending) || l.evictOldest(&l.idle) {
			continue
		}
		if l.closed {
			return false
		}
		l.freed.Wait()
	}
	if l.fromSource[c.src] >= l.o.PendingPerSource {
		l.evictOldestFrom(c.src)
	} else if l.pending.Len() >= l.o.MaxPending {
		l.evictOldest(&l.pending)
	}
	l.open++
	l.fromSource[c.src]++
	c.pending = l.pending.PushBack(c)
	c.timer = time.AfterFunc(l.o.PendingTimeout, func() { l.expire(c) })
	return true
}

// evictOldest closes the first connection of q, if any.
func (l *Listener) evictOldest(q *list.List) bool {
	e := q.Front()
	if e == nil {
		return false
	}
	l.evict(e.Value.(*Conn))
	return true
}

// evictOldestFrom closes the oldest pending connection from src.
func (l *Listener) evictOldestFrom(src string) {
	for e := l.pending.Front(); e != nil; e = e.Next() {
		if c := e.Value.(*Conn); c.src == src {
			l.evict(c)
			return
		}
	}
}

// evict closes c (its server sees its reads fail) and frees its slot.
func (l *Listener) evict(c *Conn) {
	l.release(c)
	c.Conn.Close()
	l.evicted++
	if now := time.Now(); now.Sub(l.loggedAt) >= 10*time.Second {
		l.o.Log.Warn("closed connections that were idle or had not finished their handshake, to make room",
			"server", l.o.Name, "count", l.evicted, "max_open", l.o.MaxOpen, "max_pending", l.o.MaxPending)
		l.evicted, l.loggedAt = 0, now
	}
}

// expire closes c if it is still pending.
func (l *Listener) expire(c *Conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.pending != nil && !c.gone {
		l.release(c)
		c.Conn.Close()
	}
}

// release frees c's slot, once.
func (l *Listener) release(c *Conn) {
	if c.gone {
		return
	}
	c.gone = true
	l.unpend(c)
	if c.idle != nil {
		l.idle.Remove(c.idle)
		c.idle = nil
	}
	l.open--
	l.freed.Broadcast()
}

// unpend takes c off the pending list.
func (l *Listener) unpend(c *Conn) {
	if c.pending == nil {
		return
	}
	l.pending.Remove(c.pending)
	c.pending = nil
	c.timer.Stop()
	if l.fromSource[c.src]--; l.fromSource[c.src] <= 0 {
		delete(l.fromSource, c.src)
	}
}

// Close closes the listener; Accept returns net.ErrClosed. Accepted
// connections stay open.
func (l *Listener) Close() error {
	l.mu.Lock()
	if !l.closed {
		l.closed = true
		close(l.done)
		l.freed.Broadcast()
	}
	l.mu.Unlock()
	return l.Listener.Close()
}

func (l *Listener) isClosed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closed
}

// find returns the Conn under c (through wrappers with a NetConn method,
// such as tls.Conn), or nil.
func find(c net.Conn) *Conn {
	for c != nil {
		if lc, ok := c.(*Conn); ok {
			return lc
		}
		u, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			return nil
		}
		c = u.NetConn()
	}
	return nil
}

// Admit marks c, accepted by a Listener, as past its handshake (or its
// first request): it is no longer closed to make room for newer ones.
// Connections of other listeners are left alone.
func Admit(c net.Conn) {
	lc := find(c)
	if lc == nil {
		return
	}
	lc.l.mu.Lock()
	lc.l.unpend(lc)
	lc.l.mu.Unlock()
}

// SetIdle says whether c waits for its peer's next request (a keep-alive
// connection between requests): while idle, it may be closed to make room
// when every slot is taken. Only admitted connections are marked idle.
func SetIdle(c net.Conn, idle bool) {
	lc := find(c)
	if lc == nil {
		return
	}
	l := lc.l
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case lc.gone || lc.pending != nil:
	case idle && lc.idle == nil:
		lc.idle = l.idle.PushBack(lc)
	case !idle && lc.idle != nil:
		l.idle.Remove(lc.idle)
		lc.idle = nil
	}
}

// ConnState is an http.Server ConnState hook: a connection is admitted
// once a request starts arriving, and idle between requests.
func ConnState(c net.Conn, st http.ConnState) {
	switch st {
	case http.StateActive:
		Admit(c)
		SetIdle(c, false)
	case http.StateIdle:
		SetIdle(c, true)
	}
}

// ServeHTTP serves srv on ln through a Listener (see there), with the
// options o: the accept path every HTTP endpoint of the project uses.
func ServeHTTP(srv *http.Server, ln net.Listener, o Options) error {
	prev := srv.ConnState
	srv.ConnState = func(c net.Conn, st http.ConnState) {
		ConnState(c, st)
		if prev != nil {
			prev(c, st)
		}
	}
	return srv.Serve(Listen(ln, o))
}
