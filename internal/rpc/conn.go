package rpc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/plasmafs/plasma/internal/auth"
	"github.com/plasmafs/plasma/internal/wire"
)

// ErrClosed is returned for calls on a closed or broken connection.
var ErrClosed = errors.New("namenode connection closed")

// ErrNotSent marks a call that failed before any of its request was
// written: the namenode never saw it.
var ErrNotSent = errors.New("request not sent")

type result struct {
	resp *wire.Response
	err  error
}

// Conn is a multiplexed connection to a namenode. It is safe for concurrent
// use.
//
// There is no reader goroutine: a waiting caller takes the reader role,
// reads frames and hands other callers their responses, and returns as soon
// as it reads its own. A lone synchronous caller thus reads its response
// itself, saving a goroutine hand-off (and, across processes, a thread
// wake-up) per call.
type Conn struct {
	addr  string
	nc    net.Conn
	wmu   sync.Mutex
	wbuf  []byte
	mu    sync.Mutex
	calls map[uint64]chan result
	err   error
	next  atomic.Uint64
	sent  atomic.Uint64

	readTok chan struct{} // holds a token while nobody is reading
	dlMu    sync.Mutex    // read deadline changes
	peeking bool          // the reader waits for a frame (deadline may interrupt)
	r       *bufio.Reader
	rbuf    []byte
}

// Dial connects to the namenode at addr with the given security level
// (cred may be nil at level none).
func Dial(ctx context.Context, addr string, level auth.Level, cred *auth.Credential) (*Conn, error) {
	d := net.Dialer{Timeout: 10 * time.Second}
	raw, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("connect to namenode %s: %w", addr, err)
	}
	if tc, ok := raw.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	nc, err := auth.Client(raw, level, cred, auth.RoleNamenode)
	if err != nil {
		raw.Close()
		return nil, fmt.Errorf("namenode %s: %w", addr, err)
	}
	c := &Conn{addr: addr, nc: nc, calls: map[uint64]chan result{}, readTok: make(chan struct{}, 1),
		r: bufio.NewReaderSize(nc, 64<<10)}
	c.readTok <- struct{}{}
	return c, nil
}

// Addr returns the namenode address.
func (c *Conn) Addr() string { return c.addr }

// Requests returns how many calls this connection has sent.
func (c *Conn) Requests() uint64 { return c.sent.Load() }

// awaitFrame waits until a frame starts arriving, or ctx ends. Only this
// wait is interruptible: once a frame has begun it is read whole, so a
// caller's deadline or cancellation never cuts a frame in half and breaks
// the connection its other callers share.
func (c *Conn) awaitFrame(ctx context.Context) error {
	for {
		c.dlMu.Lock()
		c.peeking = true
		c.dlMu.Unlock()
		stop := context.AfterFunc(ctx, func() {
			c.dlMu.Lock()
			if c.peeking {
				c.nc.SetReadDeadline(time.Now())
			}
			c.dlMu.Unlock()
		})
		_, err := c.r.Peek(1)
		stop()
		c.dlMu.Lock()
		c.peeking = false
		c.nc.SetReadDeadline(time.Time{})
		c.dlMu.Unlock()
		var ne net.Error
		if err == nil || !errors.As(err, &ne) || !ne.Timeout() {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// A deadline meant for an earlier caller's wait: wait again.
	}
}

// readOne reads one frame and delivers it; it returns the id read and, if
// that id is self, the result instead of delivering it.
func (c *Conn) readOne(self uint64) (uint64, result) {
	id, payload, buf, err := wire.ReadFrame(c.r, c.rbuf)
	c.rbuf = buf
	if err != nil {
		c.fail(fmt.Errorf("%w: %s: %v", ErrClosed, c.addr, err))
		return 0, result{}
	}
	resp, derr := wire.DecodeResponse(payload)
	res := result{resp, derr}
	c.mu.Lock()
	ch := c.calls[id]
	delete(c.calls, id)
	c.mu.Unlock()
	if id == self {
		return id, res
	}
	if ch != nil {
		ch <- res
	}
	return id, result{}
}

func (c *Conn) fail(err error) {
	c.mu.Lock()
	if c.err == nil {
		c.err = err
	}
	calls := c.calls
	c.calls = map[uint64]chan result{}
	c.mu.Unlock()
	for _, ch := range calls {
		ch <- result{err: c.err}
	}
	c.nc.Close()
}

var chanPool = sync.Pool{New: func() any { return make(chan result, 1) }}

// Call sends q and waits for its response. A response with an error code
// is returned as is (err == nil); err reports transport failures, wrapping
// ErrNotSent when the request never left.
func (c *Conn) Call(ctx context.Context, q *wire.Request) (*wire.Response, error) {
	return c.call(ctx, q, true)
}

// Keepalive sends q like Call but does not count it in Requests: the
// connection's background keepalive is not work a caller asked for.
func (c *Conn) Keepalive(ctx context.Context, q *wire.Request) (*wire.Response, error) {
	return c.call(ctx, q, false)
}

func (c *Conn) call(ctx context.Context, q *wire.Request, count bool) (*wire.Response, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotSent, err)
	}
	id := c.next.Add(1)
	ch := chanPool.Get().(chan result)
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		chanPool.Put(ch)
		return nil, fmt.Errorf("%w: %w", ErrNotSent, err)
	}
	c.calls[id] = ch
	c.mu.Unlock()
	c.wmu.Lock()
	b := wire.AppendRequest(wire.BeginFrame(c.wbuf), q)
	b = wire.FinishFrame(b, id)
	_, err := c.nc.Write(b)
	if cap(b) <= 64<<10 {
		c.wbuf = b
	}
	c.wmu.Unlock()
	if count {
		c.sent.Add(1)
	}
	if err != nil {
		c.fail(fmt.Errorf("%w: %s: %v", ErrClosed, c.addr, err))
	}
	for {
		select {
		case r := <-ch:
			chanPool.Put(ch)
			return r.resp, r.err
		case <-c.readTok:
			// Our response may have been delivered while we waited.
			select {
			case r := <-ch:
				c.readTok <- struct{}{}
				chanPool.Put(ch)
				return r.resp, r.err
			default:
			}
			if err := c.awaitFrame(ctx); err != nil {
				c.readTok <- struct{}{}
				if ctx.Err() != nil {
					c.mu.Lock()
					delete(c.calls, id)
					c.mu.Unlock()
					return nil, ctx.Err()
				}
				c.fail(fmt.Errorf("%w: %s: %v", ErrClosed, c.addr, err))
				continue // our result comes from fail
			}
			got, r := c.readOne(id)
			c.readTok <- struct{}{}
			if got == id {
				chanPool.Put(ch)
				return r.resp, r.err
			}
		case <-ctx.Done():
			c.mu.Lock()
			delete(c.calls, id)
			c.mu.Unlock()
			// The channel may still receive; do not reuse it.
			return nil, ctx.Err()
		}
	}
}

// Broken reports whether the connection has failed or been closed.
func (c *Conn) Broken() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err != nil
}

// Close closes the connection; the namenode aborts its open transactions.
func (c *Conn) Close() error {
	c.fail(fmt.Errorf("%w: %s", ErrClosed, c.addr))
	return nil
}
