package namenode

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime/debug"
	"sync"
	"time"

	"github.com/plasmafs/plasma/internal/auth"
	"github.com/plasmafs/plasma/internal/connlimit"
	"github.com/plasmafs/plasma/internal/wire"
)

// conn is one client (or datanode) connection. Requests are read and
// answered in order by one goroutine; only commits, which wait for the
// disk, are answered from a goroutine of their own.
type conn struct {
	nc    net.Conn
	wmu   sync.Mutex
	who   *auth.Identity // nil at security level none
	ntxns int            // open transactions (guarded by Namenode.mu)

	// Answers from other goroutines (the committer) are queued for the
	// connection's writer, so a client that stops reading blocks nobody
	// but itself.
	qmu    sync.Mutex
	queue  [][]byte
	queued int
	wake   chan struct{}
	done   chan struct{}
}

// writeTimeout bounds one reply write; a client that does not read its
// answers for this long is disconnected.
const writeTimeout = 30 * time.Second

// maxQueued bounds the answers queued for a client that does not read.
const maxQueued = 16 << 20

func newConn(nc net.Conn, who *auth.Identity) *conn {
	c := &conn{nc: nc, who: who, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go c.writer()
	return c
}

func frame(id uint64, r *wire.Response) []byte {
	b := wire.AppendResponse(wire.BeginFrame(make([]byte, 0, 128)), r)
	return wire.FinishFrame(b, id)
}

// send writes an answer from the connection's own goroutine.
func (c *conn) send(id uint64, r *wire.Response) error {
	return c.write(frame(id, r))
}

func (c *conn) write(b []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.nc.SetWriteDeadline(time.Now().Add(writeTimeout))
	_, err := c.nc.Write(b)
	if err != nil {
		c.nc.Close() // a timed-out TLS write leaves the stream unusable
	}
	return err
}

// sendAsync queues an answer for the writer; it never blocks.
func (c *conn) sendAsync(id uint64, r *wire.Response) {
	b := frame(id, r)
	c.qmu.Lock()
	if c.queued+len(b) > maxQueued {
		c.qmu.Unlock()
		c.nc.Close()
		return
	}
	c.queue = append(c.queue, b)
	c.queued += len(b)
	c.qmu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *conn) writer() {
	for {
		select {
		case <-c.done:
			return
		case <-c.wake:
		}
		c.qmu.Lock()
		q := c.queue
		c.queue, c.queued = nil, 0
		c.qmu.Unlock()
		for _, b := range q {
			if c.write(b) != nil {
				break
			}
		}
	}
}

// Serve accepts connections on ln until Close. Accept errors (such as
// running out of file descriptors) are retried with backoff; they never
// end Serve.
func (n *Namenode) Serve(ln net.Listener) error {
	n.lnMu.Lock()
	n.lns = append(n.lns, ln)
	n.lnMu.Unlock()
	var backoff connlimit.Backoff
	for {
		nc, err := ln.Accept()
		if err != nil {
			select {
			case <-n.stop:
				return nil
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			n.log.Warn("accept failed, retrying", "err", err)
			if !backoff.Wait(n.stop) {
				return nil
			}
			continue
		}
		backoff.Reset()
		if tc, ok := nc.(*net.TCPConn); ok {
			tc.SetNoDelay(true)
		}
		if err := n.limits.StartHandshake(connlimit.Source(nc)); err != nil {
			n.log.Warn("connection refused", "remote", nc.RemoteAddr(), "reason", err)
			nc.Close()
			continue
		}
		go n.handshake(nc)
	}
}

// handshake authenticates a new connection at the configured level.
func (n *Namenode) handshake(nc net.Conn) {
	sc, who, err := auth.Server(nc, n.cfg.Security, n.cfg.Credential)
	user, privileged := "", who == nil
	if who != nil {
		user = who.User
		privileged = who.Super() || who.Role.Daemon()
	}
	if lerr := n.limits.EndHandshake(connlimit.Source(nc), err == nil, user, privileged); err != nil {
		n.log.Warn("connection refused", "remote", nc.RemoteAddr(), "err", err)
		nc.Close()
		return
	} else if lerr != nil {
		n.log.Warn("connection refused", "remote", nc.RemoteAddr(), "reason", lerr)
		c := newConn(sc, who)
		c.send(0, &wire.Response{Code: wire.ErrCodeUnavailable, Msg: "connection refused: " + lerr.Error()})
		close(c.done)
		sc.Close()
		return
	}
	c := newConn(sc, who)
	n.lnMu.Lock()
	n.conns[c] = struct{}{}
	n.lnMu.Unlock()
	n.serveConn(c)
}

func (n *Namenode) serveConn(c *conn) {
	defer func() {
		close(c.done)
		c.nc.Close()
		n.lnMu.Lock()
		delete(n.conns, c)
		n.lnMu.Unlock()
		user := ""
		if c.who != nil {
			user = c.who.User
		}
		n.limits.Closed(user)
		n.mu.Lock()
		for k, tx := range n.txns.all() {
			if k.conn == c && !tx.committing {
				n.endTxn(tx, false)
			}
		}
		n.connClosed(c)
		n.mu.Unlock()
	}()
	r := bufio.NewReaderSize(c.nc, 64<<10)
	var buf []byte
	for {
		c.nc.SetReadDeadline(time.Now().Add(n.cfg.IdleTimeout))
		id, payload, nb, err := wire.ReadFrame(r, buf)
		buf = nb
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				n.log.Debug("closing connection", "remote", c.nc.RemoteAddr(), "err", err)
			}
			return
		}
		q, err := wire.DecodeRequest(payload)
		if cap(buf) > 1<<20 {
			buf = nil // a large frame's buffer is not kept for the connection's life
		}
		if err != nil {
			// The frame was read whole, so the stream is intact: answer
			// this request and keep the connection (and its transactions).
			n.log.Debug("bad request", "remote", c.nc.RemoteAddr(), "err", err)
			if c.send(id, &wire.Response{Code: wire.ErrCodeInvalid, Msg: "bad request: " + err.Error()}) != nil {
				return
			}
			continue
		}
		n.requests.Add(1)
		n.perOp[q.Op].Add(1)
		if q.Op == wire.OpCommit {
			n.commit(c, id, q.Txn, q.Flags&wire.FlagAsync != 0, nil)
			continue
		}
		if q.Op == wire.OpSync {
			n.syncBarrier(c, id)
			continue
		}
		if q.Op == wire.OpRegister || q.Op == wire.OpBackup {
			n.serveAsync(c, id, q)
			continue
		}
		resp, err := n.handleSafely(c, q)
		if q.Flags&wire.FlagCommit != 0 && q.Txn != 0 {
			// A compound request: the change and its commit in one round
			// trip. On failure nothing of the transaction remains.
			if err == nil {
				if resp == nil {
					resp = &wire.Response{}
				}
				n.commit(c, id, q.Txn, q.Flags&wire.FlagAsync != 0, resp)
				continue
			}
			n.mu.Lock()
			if tx := n.txns.get(c, q.Txn); tx != nil && !tx.committing {
				n.endTxn(tx, false)
			}
			n.mu.Unlock()
		}
		if err != nil {
			resp = toResponse(err)
		} else if resp == nil {
			resp = &wire.Response{}
		}
		if err := c.send(id, resp); err != nil {
			return
		}
	}
}

// handleSafely runs one request under the namenode lock. A panic is
// contained: logged with its stack, answered as an internal error, and the
// namenode keeps serving (the request's own changes stay private to its
// transaction, which the client can abort).
func (n *Namenode) handleSafely(c *conn, q *wire.Request) (resp *wire.Response, err error) {
	n.mu.Lock()
	defer func() {
		if p := recover(); p != nil {
			n.log.Error("panic while serving a request", "op", q.Op, "panic", p, "stack", string(debug.Stack()))
			resp, err = nil, fail(wire.ErrCodeInternal, "internal error while serving %s (logged on the namenode)", q.Op)
		}
		n.mu.Unlock()
	}()
	return n.handle(c, q)
}

// commit queues tx for the committer and answers resp (an empty answer
// when nil) once the commit is durable, or with async once it is applied.
func (n *Namenode) commit(c *conn, id, txID uint64, async bool, resp *wire.Response) {
	if resp == nil {
		resp = &wire.Response{}
	}
	async = async || n.cfg.Relaxed
	n.mu.Lock()
	tx := n.txns.get(c, txID)
	if tx == nil || tx.committing {
		n.mu.Unlock()
		// Clients send commit only for transactions they used, so a missing
		// one was aborted (timeout, conflict handling) and must not be
		// reported as committed.
		c.send(id, &wire.Response{Code: wire.ErrCodeTxn, Msg: fmt.Sprintf("transaction %d is not open (aborted or timed out); nothing was committed", txID)})
		return
	}
	if len(tx.inodes) == 0 && len(tx.entries) == 0 && len(tx.blocks) == 0 {
		n.endTxn(tx, true)
		n.mu.Unlock()
		c.send(id, resp)
		return
	}
	tx.committing = true
	req := &commitReq{tx: tx, change: n.prepareCommit(tx), async: async, owner: c,
		reply:  func(error) { c.sendAsync(id, resp) },
		direct: func() { c.send(id, resp) }}
	n.mu.Unlock()
	n.cm.submit(req, c)
}

// syncBarrier answers once everything applied before it is durable.
func (n *Namenode) syncBarrier(c *conn, id uint64) {
	n.cm.submit(&commitReq{owner: c, reply: func(error) { c.sendAsync(id, &wire.Response{}) },
		direct: func() { c.send(id, &wire.Response{}) }}, c)
}
