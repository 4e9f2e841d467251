package namenode

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/plasmafs/plasma/internal/auth"
	"github.com/plasmafs/plasma/internal/connlimit"
	"github.com/plasmafs/plasma/internal/wire"
)

// rpcServer is the namenode's RPC server: listeners, connections and
// their limits, handshakes, reading request frames and writing answers,
// and dispatch of each request to the namenode (requestHandler), which
// runs it through its operation table under the namenode lock; a request
// that waits for the store is answered by the namenode itself, later
// (answersLater). It knows nothing of transactions or metadata.
//
// Lock discipline: lnMu guards lns and conns; the limiter and the
// counters are safe for concurrent use. It never takes Namenode.mu
// itself: the handler's methods do.
type rpcServer struct {
	h           requestHandler
	security    auth.Level
	credential  *auth.Credential
	idleTimeout time.Duration
	log         *slog.Logger
	stop        <-chan struct{}

	lnMu   sync.Mutex
	lns    []net.Listener
	conns  map[*conn]struct{}
	limits *connlimit.Limiter
	listen connlimit.Options // of the listeners' connlimit.Listener
	frames *connlimit.Budget // memory for request frames arriving

	requests atomic.Uint64
	perOp    [wire.NumOps]atomic.Uint64
	obs      *observer // latencies and errors (metrics.go)
}

// requestHandler is what the server dispatches requests to.
type requestHandler interface {
	// handleSafely runs a request (a panic contained): it returns the
	// answer, or an *answersLater to run once it returned.
	handleSafely(c *conn, q *wire.Request) (*wire.Response, error)
	// commit commits c's transaction txID and answers resp (empty when
	// nil) once durable, or applied if async.
	commit(c *conn, id, txID, reqID uint64, flags uint32, resp *wire.Response)
	// abortTxn ends c's transaction txID, if open and not committing
	// (a compound request's change failed).
	abortTxn(c *conn, txID uint64)
	// connGone aborts what c left open; c is closed.
	connGone(c *conn)
}

// closeAll closes the listeners and every connection.
func (srv *rpcServer) closeAll() {
	srv.lnMu.Lock()
	for _, ln := range srv.lns {
		ln.Close()
	}
	for c := range srv.conns {
		c.nc.Close()
	}
	srv.lnMu.Unlock()
}

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

	waiting atomic.Int32 // requests waiting to be run again (retryAfter)

	// readAhead is how many bytes of further requests the connection's
	// goroutine had read ahead when it took its last request off the
	// buffer. An atomic copy, not the buffer's own count: a request run
	// again after a wait (retry) commits from another goroutine.
	readAhead atomic.Int64
}

// moreRequests tells whether further requests of this connection had been
// read already when its latest request was taken, and wait for its
// goroutine.
func (c *conn) moreRequests() bool { return c.readAhead.Load() > 0 }

// maxWaiting bounds a connection's requests waiting to be run again.
const maxWaiting = 256

// writeTimeout bounds one reply write; a client that does not read its
// answers for this long is disconnected.
const writeTimeout = 30 * time.Second

// maxQueued bounds the answers queued for a client that does not read.
const maxQueued = 16 << 20

// slowRequest: a request handled (or a commit acknowledged) later than
// this is logged, with its request id.
const slowRequest = time.Second

// user is the connection's user for logs ("" at security level none).
func (c *conn) user() string {
	if c.who == nil {
		return ""
	}
	return c.who.User
}

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

// Serve accepts connections on ln until Close, or until the metadata
// store fails (then it returns an error matching ErrStoreFailed). Accept
// errors (such as running out of file descriptors) are retried with
// backoff; they never end Serve.
func (n *Namenode) Serve(ln net.Listener) error {
	if err := n.failed(); err != nil {
		ln.Close()
		return err
	}
	err := n.srv.serve(ln)
	if ferr := n.failed(); ferr != nil {
		return ferr
	}
	return err
}

func (srv *rpcServer) serve(ln net.Listener) error {
	l := connlimit.Listen(ln, srv.listen)
	srv.lnMu.Lock()
	srv.lns = append(srv.lns, l)
	srv.lnMu.Unlock()
	for {
		nc, err := l.Accept()
		if err != nil {
			return nil // closed: Accept retries every other error
		}
		go srv.handshake(nc) // TCP connections have no Nagle delay by default
	}
}

// handshake authenticates a new connection at the configured level.
func (srv *rpcServer) handshake(nc net.Conn) {
	sc, who, err := auth.Server(nc, srv.security, srv.credential)
	user, privileged := "", who == nil
	if who != nil {
		user = who.User
		privileged = who.Super() || who.Role.Daemon()
	}
	if err != nil {
		// Closed: the listener made room for newer ones (it logs that).
		lvl := slog.LevelWarn
		if errors.Is(err, net.ErrClosed) {
			lvl = slog.LevelDebug
		}
		srv.log.Log(context.Background(), lvl, "connection refused", "remote", nc.RemoteAddr(), "err", err)
		nc.Close()
		return
	}
	connlimit.Admit(nc)
	if lerr := srv.limits.Admit(user, privileged); lerr != nil {
		srv.log.Warn("connection refused", "remote", nc.RemoteAddr(), "reason", lerr)
		c := newConn(sc, who)
		c.send(0, &wire.Response{Code: wire.ErrCodeUnavailable, Msg: "connection refused: " + lerr.Error()})
		close(c.done)
		sc.Close()
		return
	}
	c := newConn(sc, who)
	srv.lnMu.Lock()
	srv.conns[c] = struct{}{}
	srv.lnMu.Unlock()
	srv.serveConn(c)
}

func (srv *rpcServer) serveConn(c *conn) {
	defer func() {
		close(c.done)
		c.nc.Close()
		srv.lnMu.Lock()
		delete(srv.conns, c)
		srv.lnMu.Unlock()
		user := ""
		if c.who != nil {
			user = c.who.User
		}
		srv.limits.Closed(user)
		srv.h.connGone(c)
	}()
	br := bufio.NewReaderSize(c.nc, 64<<10)
	fr := wire.FrameReader{R: br, Budget: srv.frames}
	defer fr.Release()
	for {
		c.nc.SetReadDeadline(time.Now().Add(srv.idleTimeout))
		id, payload, err := fr.Read()
		c.readAhead.Store(int64(br.Buffered()))
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				srv.log.Debug("closing connection", "remote", c.nc.RemoteAddr(), "err", err)
			}
			return
		}
		q, err := wire.DecodeRequest(payload) // copies what it keeps
		fr.Release()                          // a large frame's buffer is not kept for the connection's life
		if err != nil {
			// The frame was read whole, so the stream is intact: answer
			// this request and keep the connection (and its transactions).
			srv.log.Debug("bad request", "remote", c.nc.RemoteAddr(), "err", err)
			if c.send(id, &wire.Response{Code: wire.ErrCodeInvalid, Msg: "bad request: " + err.Error()}) != nil {
				return
			}
			continue
		}
		if c.who.Expired(time.Now()) {
			// The handshake checked the credential; a connection kept open
			// past its end (a job's delegated credential lives hours) is
			// served no more. Closing it aborts its transactions.
			c.send(id, &wire.Response{Code: wire.ErrCodePerm, Msg: fmt.Sprintf("the credential of %s expired at %s: get a new one (a MapReduce job's delegated credential lasts its -credential-lifetime)",
				c.who.User, c.who.Expires.UTC().Format(time.RFC3339))})
			return
		}
		srv.requests.Add(1)
		srv.perOp[q.Op].Add(1)
		start := time.Now()
		resp, err := srv.h.handleSafely(c, q)
		took := time.Since(start)
		srv.obs.request(q.Op, took)
		if took > slowRequest {
			srv.log.Warn("slow request", "op", q.Op.String(), "seconds", took.Seconds(), "user", c.user(), "req", wire.FormatReqID(q.ReqID))
		}
		var ra *retryAfter
		if errors.As(err, &ra) {
			if c.waiting.Add(1) <= maxWaiting {
				go srv.retry(c, id, q, ra)
				continue
			}
			// Too many of this client's requests wait already: it is
			// told to try again (as for a lock conflict).
			c.waiting.Add(-1)
			err = fail(wire.ErrCodeConflict, "%s: %s; too many requests of this connection waiting, try again", q.Op, ra.why)
		}
		if srv.finish(c, id, q, resp, err) != nil {
			return
		}
	}
}

// finish answers a handled request, or for a compound request commits
// its transaction (on failure nothing of the transaction remains), or
// lets a request that answers itself run.
func (srv *rpcServer) finish(c *conn, id uint64, q *wire.Request, resp *wire.Response, err error) error {
	if later, ok := err.(*answersLater); ok {
		later.run(id)
		return nil
	}
	if q.Flags&wire.FlagCommit != 0 && q.Txn != 0 {
		if err == nil {
			if resp == nil {
				resp = &wire.Response{}
			}
			srv.h.commit(c, id, q.Txn, q.ReqID, q.Flags, resp)
			return nil
		}
		srv.h.abortTxn(c, q.Txn)
	}
	if err != nil {
		resp = toResponse(err)
		srv.obs.refused(resp.Code)
		if resp.Code.Logged() {
			srv.log.Warn("request refused", "op", q.Op.String(), "code", codeName(resp.Code), "user", c.user(), "req", wire.FormatReqID(q.ReqID), "err", resp.Msg)
		}
	} else if resp == nil {
		resp = &wire.Response{}
	}
	return c.send(id, resp)
}

// retry runs a request that had to wait (retryAfter) again when it may
// proceed, while the connection's other requests go on.
func (srv *rpcServer) retry(c *conn, id uint64, q *wire.Request, ra *retryAfter) {
	defer c.waiting.Add(-1)
	for {
		t := time.NewTimer(time.Until(ra.at))
		select {
		case <-c.done:
			t.Stop()
			return
		case <-srv.stop:
			t.Stop()
			return
		case <-t.C:
		}
		resp, err := srv.h.handleSafely(c, q)
		if !errors.As(err, &ra) {
			srv.finish(c, id, q, resp, err)
			return
		}
	}
}
