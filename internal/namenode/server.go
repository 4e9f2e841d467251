package namenode

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/plasmafs/plasma/internal/auth"
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

// Serve accepts connections on ln until Close.
func (n *Namenode) Serve(ln net.Listener) error {
	n.lnMu.Lock()
	n.lns = append(n.lns, ln)
	n.lnMu.Unlock()
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
			return err
		}
		if tc, ok := nc.(*net.TCPConn); ok {
			tc.SetNoDelay(true)
		}
		n.lnMu.Lock()
		full := len(n.conns) >= n.cfg.MaxConns
		n.lnMu.Unlock()
		if full {
			n.log.Warn("connection limit reached, refusing", "remote", nc.RemoteAddr(), "limit", n.cfg.MaxConns)
			nc.Close()
			continue
		}
		go n.handshake(nc)
	}
}

// handshake authenticates a new connection at the configured level.
func (n *Namenode) handshake(nc net.Conn) {
	sc, who, err := auth.Server(nc, n.cfg.Security, n.cfg.Credential)
	if err != nil {
		n.log.Warn("connection refused", "remote", nc.RemoteAddr(), "err", err)
		nc.Close()
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
		n.mu.Lock()
		for k, tx := range n.txns {
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
			n.commit(c, id, q.Txn)
			continue
		}
		n.mu.Lock()
		resp, err := n.handle(c, q)
		n.mu.Unlock()
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

// commit queues tx for the committer and answers when it is durable.
func (n *Namenode) commit(c *conn, id, txID uint64) {
	n.mu.Lock()
	tx := n.txns[txnKey{c, txID}]
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
		c.send(id, &wire.Response{})
		return
	}
	tx.committing = true
	req := &commitReq{tx: tx, change: n.prepareCommit(tx), reply: func(err error) {
		if err != nil {
			c.sendAsync(id, &wire.Response{Code: wire.ErrCodeInternal, Msg: "commit failed: " + err.Error()})
			return
		}
		c.sendAsync(id, &wire.Response{})
	}}
	n.mu.Unlock()
	n.commitQ <- req
}
