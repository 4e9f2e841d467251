package datanode

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/plasmafs/plasma/internal/auth"
	"github.com/plasmafs/plasma/internal/connlimit"
	"github.com/plasmafs/plasma/internal/rpc"
	"github.com/plasmafs/plasma/internal/wire"
)

// Config configures a datanode server.
type Config struct {
	Dir       string
	Namenode  string        // namenode address for registration and heartbeats (a group's: comma-separated)
	Heartbeat time.Duration // interval between heartbeats
	Host      string        // host name reported to clients (to detect local readers)
	Logger    *slog.Logger

	// Security is the level of data connections (clients and other
	// datanodes); NamenodeSecurity the level towards the namenode.
	Security         auth.Level
	NamenodeSecurity auth.Level
	Credential       *auth.Credential // this datanode's daemon credential
	// TicketKey, shared with the namenode, checks tickets; nil accepts
	// requests without tickets (only sensible at level none).
	TicketKey []byte
	MaxConns  int // data connections (default 1024)
	// MaxConnsPerUser bounds one user's data connections (default 256;
	// daemons and superusers are not bound by it).
	MaxConnsPerUser int
	Idle            time.Duration // close a silent data connection after this (default 10m)
	// ReceiveMemory bounds the bytes of write data all connections
	// together hold between reading and storing them (default 1 GiB, at
	// least four blocks).
	ReceiveMemory int
	// ScrubInterval is how often the scrubber starts a pass over the
	// volume, ScrubRate the most bytes a second it reads (scrub.go);
	// ScrubInterval 0 turns it off.
	ScrubInterval time.Duration
	ScrubRate     int64
	// CopyRate bounds the bytes a second this datanode sends for
	// re-replication, all copies together (copylimit.go; 0: no bound).
	CopyRate int64
}

// Server serves one volume over the data protocol.
type Server struct {
	cfg     Config
	nodeID  atomic.Uint32 // assigned by the namenode at registration
	revMu   sync.Mutex
	revoked map[uint64]time.Time // transaction tags whose tickets are void → when learned
	floor   writeFloor           // tickets that write are issued after the last registration
	term    groupTerm            // tickets that write are of the latest namenode group term seen; older ones read only blocks not rewritten since
	store   *BlockStore
	log     *slog.Logger
	bufs    sync.Pool
	ln      net.Listener
	uln     *net.UnixListener
	mu      sync.Mutex
	conns   map[net.Conn]string // → user ("" until authenticated)
	limits  *connlimit.Limiter
	// received bounds the write data read off connections and not yet
	// stored (Config.ReceiveMemory).
	received *connlimit.Budget
	obs      *observer    // metrics.go
	copies   *copyLimiter // copylimit.go; nil: copies unpaced
	stop     chan struct{}
	bad      chan badBlock // found by the scrubber, for the namenode
	scrubbed scrubProgress // how far the scrubber got, for the namenode
	wg       sync.WaitGroup
}

// Open opens the volume for serving.
func Open(cfg Config) (*Server, error) {
	st, err := OpenBlockStore(cfg.Dir)
	if err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Heartbeat == 0 {
		cfg.Heartbeat = time.Second
	}
	if cfg.Host == "" {
		cfg.Host, _ = os.Hostname()
	}
	if cfg.Security == 0 {
		cfg.Security = auth.None
	}
	if cfg.NamenodeSecurity == 0 {
		cfg.NamenodeSecurity = auth.None
	}
	if (cfg.Security != auth.None || cfg.NamenodeSecurity != auth.None) && cfg.Credential == nil {
		st.Close()
		return nil, fmt.Errorf("security level %s/%s needs the datanode's credential", cfg.Security, cfg.NamenodeSecurity)
	}
	if cfg.MaxConnsPerUser == 0 {
		cfg.MaxConnsPerUser = 256
	}
	if cfg.MaxConns == 0 {
		cfg.MaxConns = 1024
	}
	if cfg.Idle == 0 {
		cfg.Idle = 10 * time.Minute
	}
	if cfg.CopyRate > 0 && cfg.CopyRate < int64(st.Config.Blocksize) {
		st.Close()
		return nil, fmt.Errorf("copy rate %d bytes a second is below one block (%d bytes) a second: the namenode's copies would time out; raise -copy-rate or use 0 (no bound)", cfg.CopyRate, st.Config.Blocksize)
	}
	if cfg.ReceiveMemory == 0 {
		cfg.ReceiveMemory = 1 << 30
	}
	s := &Server{cfg: cfg, store: st, log: cfg.Logger, conns: map[net.Conn]string{}, stop: make(chan struct{}), revoked: map[uint64]time.Time{},
		obs: newObserver(), bad: make(chan badBlock, 1024)}
	if cfg.TicketKey != nil {
		s.floor.refuseAll() // until the namenode says which tickets are current
	}
	s.limits = connlimit.New(cfg.MaxConns, cfg.MaxConnsPerUser)
	s.received = connlimit.NewBudget(max(cfg.ReceiveMemory, 4*int(st.Config.Blocksize)), receiveWait)
	bs := int(st.Config.Blocksize)
	s.copies = newCopyLimiter(cfg.CopyRate, copyBurstBlocks*bs)
	s.bufs.New = func() any { b := make([]byte, bs); return &b }
	return s, nil
}

// Store returns the block store.
func (s *Server) Store() *BlockStore { return s.store }

// Backoff between attempts to reach the namenode.
const (
	retryMin = 100 * time.Millisecond
	retryMax = 5 * time.Second
)

// unreachableError is a failure to reach the namenode (to connect, or to
// get an answer): worth trying again, unlike a refusal.
type unreachableError struct{ error }

func (e unreachableError) Unwrap() error { return e.error }

// Register connects to the namenode and registers this volume at addr (the
// data protocol address). While the namenode cannot be reached it retries
// with backoff until ctx ends; it returns an error if the namenode refuses
// the volume (other cluster, other blocksize). Afterwards it keeps sending
// heartbeats and re-registers after a lost connection until Close.
func (s *Server) Register(ctx context.Context, addr, socket string) error {
	delay := retryMin
	for {
		c, err := s.register(ctx, addr, socket)
		if err == nil {
			s.wg.Add(1)
			go s.heartbeats(c, addr, socket)
			if s.cfg.ScrubInterval > 0 && s.cfg.ScrubRate > 0 {
				s.wg.Add(1)
				go s.scrub()
			}
			return nil
		}
		if !errors.As(err, new(unreachableError)) || ctx.Err() != nil {
			return err
		}
		s.log.Warn("namenode unreachable, retrying", "namenode", s.cfg.Namenode, "in", delay, "err", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("gave up: %w", err)
		case <-time.After(delay):
		}
		delay = min(2*delay, retryMax)
	}
}

func (s *Server) nodeInfo(addr, socket string) *wire.NodeInfo {
	cfg := s.store.Config
	ni := &wire.NodeInfo{Identity: cfg.Identity, Cluster: cfg.Cluster, Addr: addr, Socket: socket, Host: s.cfg.Host, Blocksize: cfg.Blocksize, Blocks: cfg.Blocks, Namespace: cfg.Namespace}
	capacity, used := s.store.Space()
	ni.Capacity, ni.UsedBytes = uint64(capacity), uint64(used)
	return ni
}

func (s *Server) register(ctx context.Context, addr, socket string) (*rpc.Conn, error) {
	// A namenode group's members, comma-separated: the leader is found.
	c, err := rpc.DialLeader(ctx, strings.Split(s.cfg.Namenode, ","), s.cfg.NamenodeSecurity, s.cfg.Credential)
	if err != nil {
		return nil, unreachableError{err}
	}
	resp, err := c.Call(ctx, &wire.Request{Op: wire.OpRegister, Node: s.nodeInfo(addr, socket), Extents: s.store.slotReport()})
	if err != nil {
		c.Close()
		return nil, unreachableError{err}
	}
	if resp.Code == wire.ErrCodeNotLeader {
		// The group's leader changed since DialLeader found it: try again.
		c.Close()
		return nil, unreachableError{errors.New(resp.Msg)}
	}
	if err == nil && resp.Code != wire.OK && len(resp.Nodes) > 0 {
		// Refused with the namenode's namespace id: if it is another
		// one than the volume's, say so, naming the volume.
		if nerr := s.store.JoinNamespace(s.cfg.Dir, resp.Nodes[0].Namespace, s.cfg.Namenode); nerr != nil {
			resp.Msg = nerr.Error()
		}
	}
	if err == nil && resp.Code != wire.OK {
		err = fmt.Errorf("namenode %s refused datanode: %s", s.cfg.Namenode, resp.Msg)
	}
	if err != nil {
		c.Close()
		return nil, err
	}
	if len(resp.Nodes) == 0 {
		c.Close()
		return nil, fmt.Errorf("namenode %s: empty registration answer", s.cfg.Namenode)
	}
	if len(resp.Counters) > 1 {
		// A namenode of an older term than this datanode has seen is a
		// deposed leader that has not noticed yet: find the current one.
		if term, seen := resp.Counters[1], s.term.current(); term < seen {
			c.Close()
			return nil, unreachableError{fmt.Errorf("namenode %s leads term %d, but this datanode has seen term %d: a deposed leader of the namenode group", c.Addr(), term, seen)}
		}
		s.term.registered(resp.Counters[1])
	}
	// The volume records the namespace when it first joins, and refuses
	// another one (the namenode refuses it too).
	if err := s.store.JoinNamespace(s.cfg.Dir, resp.Nodes[0].Namespace, s.cfg.Namenode); err != nil {
		c.Close()
		return nil, err
	}
	// Writes of durable commits this volume may have lost (journal.go),
	// before it counts as registered.
	if resp, err = s.applyJournalPages(ctx, c, resp, addr, socket); err != nil {
		c.Close()
		return nil, unreachableError{err}
	}
	s.nodeID.Store(resp.Nodes[0].ID)
	if len(resp.Counters) > 0 {
		s.floor.raise(resp.Counters[0])
	}
	s.log.Info("registered with namenode", "namenode", s.cfg.Namenode, "id", resp.Nodes[0].ID)
	return c, nil
}

func (s *Server) heartbeats(c *rpc.Conn, addr, socket string) {
	defer s.wg.Done()
	t := time.NewTicker(s.cfg.Heartbeat)
	defer t.Stop()
	ni := s.nodeInfo(addr, socket)
	var retry time.Time // no attempt to re-register before this
	delay := retryMin
	// released is the last batch of freed slots emptied (release.go), to
	// acknowledge with the next heartbeat; 0: none.
	var released uint64
	var kept []wire.Extent // the slots of batch released that kept their pages
	for {
		select {
		case <-s.stop:
			if c != nil {
				c.Close()
			}
			return
		case <-t.C:
		}
		if c == nil {
			if time.Now().Before(retry) {
				continue
			}
			var err error
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			c, err = s.register(ctx, addr, socket)
			cancel()
			if err != nil {
				what := "namenode unreachable, retrying"
				if !errors.As(err, new(unreachableError)) {
					// Refused (e.g. removed from the cluster): the
					// message says why and what to do.
					what = "namenode refused this datanode, retrying"
				}
				s.log.Warn(what, "namenode", s.cfg.Namenode, "in", delay, "err", err)
				retry = time.Now().Add(delay)
				delay = min(2*delay, retryMax)
				continue
			}
			delay = retryMin
			released, kept = 0, nil
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		// Index carries the scrubber's progress (scrubProgress.report), Size
		// the last batch of freed slots released (release.go), Extents those
		// of its slots that kept their pages (keep.go).
		resp, err := c.Call(ctx, s.scrubbed.report(&wire.Request{Op: wire.OpHeartbeat, Node: s.heartbeatNode(ni.Identity), Size: int64(released), Extents: kept}))
		cancel()
		if err == nil && resp.Code != wire.OK {
			err = errors.New(resp.Msg)
		}
		if err == nil {
			s.revoke(resp.Counters)
			s.reportBad(c)
			released, kept = s.releaseFreed(resp.Extents)
		}
		if err != nil {
			s.log.Warn("lost namenode connection", "err", err)
			c.Close()
			c = nil
			// If the namenode restarted, it forgot the revocations it
			// had not sent yet: no ticket writes until it tells us
			// which are current (writeFloor).
			if s.cfg.TicketKey != nil {
				s.floor.refuseAll()
			}
		}
	}
}

// Serve accepts data protocol connections on ln until Close. Accept
// errors (such as running out of file descriptors) are retried with
// backoff; they never end Serve.
func (s *Server) Serve(ln net.Listener) error {
	l := connlimit.Listen(ln, connlimit.Options{Name: "datanode", Log: s.log, PendingPerSource: maxHandshakesPerSource,
		MaxOpen: s.cfg.MaxConns + reserveConns + connlimit.DefaultMaxPending})
	s.mu.Lock()
	s.ln = l
	s.mu.Unlock()
	for {
		nc, err := l.Accept()
		if err != nil {
			return nil // closed: Accept retries every other error
		}
		s.mu.Lock()
		s.conns[nc] = ""
		s.mu.Unlock()
		go s.handshake(nc)
	}
}

// handshake authenticates a new data connection and serves it.
func (s *Server) handshake(nc net.Conn) {
	sc, who, err := auth.Server(nc, s.cfg.Security, s.cfg.Credential)
	user, privileged := "", who == nil
	if who != nil {
		user, privileged = who.User, who.Super() || who.Role.Daemon()
	}
	if err == nil {
		connlimit.Admit(nc)
		err = s.limits.Admit(user, privileged)
	}
	s.mu.Lock()
	if err != nil {
		delete(s.conns, nc)
	} else {
		s.conns[nc] = user
	}
	s.mu.Unlock()
	if err != nil {
		// Closed: the listener made room for newer ones (it logs that).
		lvl := slog.LevelWarn
		if errors.Is(err, net.ErrClosed) {
			lvl = slog.LevelDebug
		}
		s.log.Log(context.Background(), lvl, "data connection refused", "remote", nc.RemoteAddr(), "err", err)
		nc.Close()
		return
	}
	s.serveConn(nc, sc)
}

// Connection limits (as the namenode's, internal/connlimit): daemons
// (other datanodes forwarding a chain) and superusers may use reserveConns
// past MaxConns; maxHandshakesPerSource bounds the connections from one
// address that have not finished their handshake.
const (
	receiveWait            = 30 * time.Second // for the receive budget, before the connection is closed
	reserveConns           = 64
	maxHandshakesPerSource = 64
)

// revoke records transaction tags whose tickets are no longer valid.
func (s *Server) revoke(tags []uint64) {
	s.revMu.Lock()
	defer s.revMu.Unlock()
	now := time.Now()
	for _, t := range tags {
		s.revoked[t] = now
	}
	// Tickets live at most a day; forget older revocations.
	for t, at := range s.revoked {
		if now.Sub(at) > 24*time.Hour {
			delete(s.revoked, t)
		}
	}
}

// checkTicket verifies the ticket of a request for count blocks from block
// and returns its generation, which the block store checks against the
// blocks' (NoTicket without a ticket key).
func (s *Server) checkTicket(raw []byte, block, count uint64, write bool) (uint64, error) {
	gen, _, err := s.checkTicketGens(raw, block, count, write)
	return gen, err
}

// checkReadTicket checks a read ticket for one block and returns its
// generation, how many bytes of the block it lets its holder read (0:
// all): a file's partly filled last block, which may be extended in place
// after the ticket was issued, only up to its length then; and its term,
// checked again after reading (groupTerm.checkRead).
func (s *Server) checkReadTicket(raw []byte, block uint64) (gen, limit, term uint64, err error) {
	t, err := s.checkTicketFull(raw, block, 1, false)
	if err != nil || t == nil {
		return NoTicket, 0, 0, err
	}
	if t.From != 0 && block == t.Start+t.Count-1 {
		limit = t.From
	}
	return t.Gen, limit, t.Term, nil
}

// openTicket opens a ticket, checks it with check, and refuses it if its
// transaction has ended, or if it writes and was issued before this
// datanode's registration (writeFloor).
func (s *Server) openTicket(raw []byte, check func(*auth.Ticket) error) (*auth.Ticket, error) {
	if len(raw) == 0 {
		return nil, errors.New("request without a ticket refused")
	}
	t, err := auth.OpenTicket(s.cfg.TicketKey, raw)
	if err != nil {
		return nil, err
	}
	if err := check(t); err != nil {
		return nil, err
	}
	if err := s.term.checkWrite(t); err != nil {
		return nil, err
	}
	s.revMu.Lock()
	_, dead := s.revoked[t.Tag]
	s.revMu.Unlock()
	if dead {
		return nil, auth.ErrTicketRevoked
	}
	if t.Write || t.Append {
		if ok, floor := s.floor.admits(t.Seq); !ok {
			if floor == refusing {
				return nil, fmt.Errorf("%w: this datanode is not registered with the namenode (it is starting or lost its connection): try again", auth.ErrTicketOutdated)
			}
			return nil, fmt.Errorf("%w: ticket %#x, registration %#x", auth.ErrTicketOutdated, t.Seq, floor)
		}
	}
	return t, nil
}

// checkTicketGens checks a ticket and returns its generation and, for a
// read ticket, the least generation the blocks must hold.
func (s *Server) checkTicketGens(raw []byte, block, count uint64, write bool) (uint64, uint64, error) {
	t, err := s.checkTicketFull(raw, block, count, write)
	if err != nil || t == nil {
		return NoTicket, 0, err
	}
	return t.Gen, t.MinGen, nil
}

// checkTicketFull checks a ticket for count blocks from block and returns
// it (nil without a ticket key: no checks).
func (s *Server) checkTicketFull(raw []byte, block, count uint64, write bool) (*auth.Ticket, error) {
	if s.cfg.TicketKey == nil {
		return nil, nil
	}
	t, err := s.openTicket(raw, func(t *auth.Ticket) error {
		if err := t.Check(s.nodeID.Load(), block, count, write, time.Now()); err != nil {
			return err
		}
		if !write && t.Write {
			// Newly allocated blocks still hold what their last owner
			// wrote: the ticket to fill them is no ticket to read them.
			return fmt.Errorf("%w: a write ticket does not allow reading", auth.ErrTicketRange)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if t.Gen == NoTicket {
		return nil, fmt.Errorf("%w: generation %#x is reserved", auth.ErrTicketRange, t.Gen)
	}
	if write {
		// Before the data changes (see groupTerm.wrote).
		for b := block; b < block+count; b++ {
			s.term.wrote(b, t.Term)
		}
	} else {
		if err := s.term.checkRead(t.Term, block, count); err != nil {
			return nil, err
		}
		for b := block; b < block+count; b++ {
			// Generation 0: written without a ticket (level none, or
			// before generations), so of unknown allocation: readable as
			// before; blocks written under tickets are held to MinGen.
			if g := s.store.Gen(b); g != 0 && g < t.MinGen {
				return nil, fmt.Errorf("%w: block %d was not written by the allocation the ticket names (generation %#x, the ticket needs %#x)", auth.ErrTicketRange, b, g, t.MinGen)
			}
		}
	}
	return t, nil
}

// checkAppendTicket checks an append ticket for writing block from offset
// off and returns its generation (NoTicket without a ticket key).
func (s *Server) checkAppendTicket(raw []byte, block, off uint64) (gen, seq uint64, err error) {
	if s.cfg.TicketKey == nil {
		return NoTicket, 0, nil
	}
	t, err := s.openTicket(raw, func(t *auth.Ticket) error {
		return t.CheckAppend(s.nodeID.Load(), block, off, time.Now())
	})
	if err != nil {
		return 0, 0, err
	}
	if t.Gen == NoTicket || t.Gen == 0 {
		return 0, 0, fmt.Errorf("%w: generation %#x cannot be extended", auth.ErrTicketRange, t.Gen)
	}
	s.term.wrote(block, t.Term) // before the data changes
	return t.Gen, t.Seq, nil
}

// Close stops serving.
func (s *Server) Close() error {
	close(s.stop)
	s.mu.Lock()
	if s.ln != nil {
		s.ln.Close()
	}
	if s.uln != nil {
		s.uln.Close()
	}
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return s.store.Close()
}

// hop is an outgoing connection to the next datanode of a write chain.
type hop struct {
	addr string
	nc   net.Conn
	r    *bufio.Reader
}

// job is one request read off a connection, with its data.
type job struct {
	q    *wire.DataReq
	bufp *[]byte // write data (pooled)
	held int     // bytes of the receive budget its data holds
}

// receiveChunk is how much of a write's data is granted by the receive
// budget at a time.
const receiveChunk = 1 << 20

// receive reads a write's data into buf, in chunks each granted by the
// receive budget before it is read, and returns the bytes granted (also
// on failure): peers that announce blocks and send them slowly, or not
// at all, pin no more than the budget together.
func (s *Server) receive(r io.Reader, buf []byte) (held int, err error) {
	for off := 0; off < len(buf); {
		n := min(len(buf)-off, receiveChunk)
		if err := s.received.Acquire(n); err != nil {
			return held, err
		}
		held += n
		if _, err := io.ReadFull(r, buf[off:off+n]); err != nil {
			return held, err
		}
		off += n
	}
	return held, nil
}

// done gives back what job j holds: its buffer and its grant.
func (s *Server) done(j job) {
	if j.bufp != nil {
		s.bufs.Put(j.bufp)
	}
	s.received.Release(j.held)
}

// serveConn reads requests in one goroutine and executes them, in order,
// in another, so receiving the next block overlaps storing this one.
func (s *Server) serveConn(raw, nc net.Conn) {
	defer func() {
		nc.Close()
		raw.Close()
		s.mu.Lock()
		user := s.conns[raw]
		delete(s.conns, raw)
		s.mu.Unlock()
		s.limits.Closed(user)
	}()
	jobs := make(chan job, 4)
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.execute(nc, jobs)
	}()
	defer func() {
		close(jobs)
		<-done
	}()
	r := bufio.NewReaderSize(nc, 256<<10)
	bs := int(s.store.Config.Blocksize)
	for {
		nc.SetReadDeadline(time.Now().Add(s.cfg.Idle))
		q, err := wire.ReadDataReq(r, nil)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				s.log.Debug("data connection closed", "remote", nc.RemoteAddr(), "err", err)
			}
			return
		}
		j := job{q: q}
		if q.Op == wire.DataWrite || q.Op == wire.DataExtend {
			if int(q.Length) > bs {
				s.log.Warn("write larger than a block, closing connection", "remote", nc.RemoteAddr(), "length", q.Length)
				return
			}
			j.bufp = s.bufs.Get().(*[]byte)
			var err error
			if j.held, err = s.receive(r, (*j.bufp)[:q.Length]); err != nil {
				s.done(j)
				if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
					s.log.Debug("data connection closed", "remote", nc.RemoteAddr(), "err", err)
				}
				return
			}
		}
		select {
		case jobs <- j:
		case <-done:
			s.done(j)
			return
		}
	}
}

// execute runs the jobs of one connection in order and writes responses.
func (s *Server) execute(nc net.Conn, jobs <-chan job) {
	w := bufio.NewWriterSize(nc, 64<<10)
	var next *hop
	defer func() {
		if next != nil {
			next.nc.Close()
		}
	}()
	bs := int(s.store.Config.Blocksize)
	failed := false
	fail := func(err error) {
		if err != nil && !failed {
			failed = true
			nc.Close()
		}
	}
	// Re-replicated blocks in flight to their destination (replicate.go):
	// their answers are written, in order, before any later one.
	var copies copyPipe
	drain := func() {
		s.drainCopies(&copies, &next, func(q *wire.DataReq, resp wire.DataResp) {
			if !failed {
				fail(s.answer(w, q.Op, q, &resp, nil))
			}
		})
	}
	defer func() {
		drain()
		if !failed {
			w.Flush()
		}
	}()
	for j := range jobs {
		if failed {
			s.done(j)
			continue
		}
		if len(copies.sent) > 0 && (j.q.Op != wire.DataReplicate || !copies.accepts(j.q)) {
			drain()
		}
		q := j.q
		op := q.Op // q is replaced below if its ticket is refused
		var resp wire.DataResp
		var payload []byte
		bufp := j.bufp
		var readTerm uint64 // a read ticket's namenode group term
		var terr error
		var gen uint64 // the ticket's generation
		var seq uint64 // an append ticket's sequence number
		switch q.Op {
		case wire.DataWrite, wire.DataAdopt:
			gen, terr = s.checkTicket(q.Ticket, q.Block, 1, true)
		case wire.DataReplicate:
			// The whole block is copied: a read ticket limited to a
			// prefix (a partly filled last block) does not allow it.
			var lim uint64
			gen, lim, _, terr = s.checkReadTicket(q.Ticket, q.Block)
			if terr == nil && lim > 0 {
				terr = fmt.Errorf("%w: the ticket allows reading the first %d bytes of block %d, not copying it", auth.ErrTicketRange, lim, q.Block)
			}
		case wire.DataRead:
			var lim uint64
			gen, lim, readTerm, terr = s.checkReadTicket(q.Ticket, q.Block)
			if terr == nil && lim > 0 && (q.Length == 0 || uint64(q.Length) > lim) {
				terr = fmt.Errorf("%w: the ticket allows reading the first %d bytes of block %d (the version it was issued for), not %d", auth.ErrTicketRange, lim, q.Block, q.Length)
			}
		case wire.DataExtend:
			gen, seq, terr = s.checkAppendTicket(q.Ticket, q.Block, uint64(q.Offset))
		case wire.DataVerify:
			gen, terr = s.checkTicket(q.Ticket, q.Block, uint64(q.Count), false)
		}
		if terr != nil {
			resp = wire.DataResp{Status: wire.ErrCodePerm, Msg: fmt.Sprintf("datanode %s: %v", s.store.Config.Identity, terr)}
			q = &wire.DataReq{} // answered below without doing anything
		}
		switch q.Op {
		case wire.DataWrite:
			if err := s.writeChain(&next, q, (*bufp)[:q.Length], gen, 0); err != nil {
				resp = errResp(err)
			}
		case wire.DataAdopt:
			bufp = s.bufs.Get().(*[]byte)
			if int(q.Length) > bs {
				q.Length = uint32(bs)
			}
			err := s.store.Adopt(q.Block, int(q.Length), q.CRC, gen, *bufp)
			if err == nil && len(q.Chain) > 0 {
				err = s.forward(&next, q, (*bufp)[:q.Length])
			}
			if err != nil {
				resp = errResp(err)
			}
		case wire.DataExtend:
			if err := s.writeChain(&next, q, (*bufp)[:q.Length], gen, seq); err != nil {
				resp = errResp(err)
			}
		case wire.DataRead:
			bufp = s.bufs.Get().(*[]byte)
			var err error
			if q.Length > 0 {
				// A version's prefix, checked against the reader's checksum.
				if err = s.store.ReadPrefix(q.Block, *bufp, gen, int(q.Length), q.CRC); err == nil {
					resp.CRC, resp.Length = q.CRC, q.Length
					payload = (*bufp)[:q.Length]
				}
			} else {
				// Only what is on disk travels; the reader zero-fills the tail.
				var crc uint32
				var n int
				if crc, n, err = s.store.ReadN(q.Block, *bufp, gen); err == nil {
					resp.CRC = crc
					resp.Length = uint32(n)
					payload = (*bufp)[:n]
				}
			}
			if err == nil && s.cfg.TicketKey != nil {
				// The term again, after reading: a writer of a later
				// term records it before the data changes.
				if err = s.term.checkRead(readTerm, q.Block, 1); err != nil {
					err = fmt.Errorf("datanode %s: %w", s.store.Config.Identity, err)
				}
			}
			if err != nil {
				resp, payload = errResp(err), nil
			}
		case wire.DataReplicate:
			bufp = s.bufs.Get().(*[]byte)
			err := s.sendReplica(&next, q, gen, *bufp)
			if err == nil {
				// Answered once the destination has: meanwhile the
				// next block is read and sent.
				copies.sent = append(copies.sent, sentCopy{q: j.q, addr: q.Chain[0].Addr})
				s.bufs.Put(bufp)
				s.done(j)
				if len(jobs) == 0 || len(copies.sent) >= maxCopiesInFlight {
					drain()
					if !failed && len(jobs) == 0 {
						fail(w.Flush())
					}
				}
				continue
			}
			resp = errResp(err)
		case wire.DataSync:
			if s.nodeID.Load() == 0 {
				// A datanode that has not registered yet may have restarted
				// since writes someone now wants synced: the namenode, which
				// syncs deferred writes, must see the new registration first.
				resp = wire.DataResp{Status: wire.ErrCodeUnavailable, Msg: fmt.Sprintf("datanode %s is not registered with the namenode yet: try again", s.store.Config.Identity)}
			} else if err := s.store.Sync(); err != nil {
				resp = errResp(err)
			}
		case wire.DataVerify:
			if q.Count > wire.MaxVerify {
				resp = wire.DataResp{Status: wire.ErrCodeInvalid, Msg: fmt.Sprintf("verify of %d blocks: at most %d per request", q.Count, wire.MaxVerify)}
				break
			}
			bad, crcs, err := s.store.Verify(q.Block, uint64(q.Count), gen)
			if err != nil {
				resp = errResp(err)
			}
			resp.Bad, resp.CRCs = bad, crcs
		case wire.DataIdentity:
			c := s.store.Config
			resp.Identity, resp.Cluster, resp.Blocks, resp.Bsize = c.Identity, c.Cluster, c.Blocks, c.Blocksize
		}
		drain() // the answers of blocks sent before (none but after a refusal) come first
		var err error
		if !failed { // a drain may have failed to answer
			err = s.answerAs(w, op, j.q, q, &resp, payload)
		}
		if bufp != j.bufp {
			s.bufs.Put(bufp) // a buffer of its own (read, adopt)
		}
		s.done(j)
		// Flush only when no further request is queued, so a pipelining
		// client gets few, large writes.
		if err == nil && len(jobs) == 0 {
			err = w.Flush()
		}
		fail(err)
	}
}

// answer writes the response to q (and its payload), logging a refusal
// and counting it for the metrics.
func (s *Server) answer(w io.Writer, op wire.DataOp, q *wire.DataReq, resp *wire.DataResp, payload []byte) error {
	return s.answerAs(w, op, q, q, resp, payload)
}

// answerAs is answer for a request received as orig and carried out as q
// (an empty request if its ticket was refused).
func (s *Server) answerAs(w io.Writer, op wire.DataOp, orig, q *wire.DataReq, resp *wire.DataResp, payload []byte) error {
	if resp.Status != wire.OK {
		s.log.Warn("data request refused", "op", dataOpNames[op], "block", orig.Block, "req", wire.FormatReqID(orig.ReqID), "err", resp.Msg)
	}
	s.obs.request(op, q, resp, len(payload))
	err := wire.WriteDataResp(w, resp)
	if err == nil && payload != nil {
		_, err = w.Write(payload)
	}
	return err
}

func errResp(err error) wire.DataResp {
	code := wire.ErrCodeInternal
	switch {
	case errors.Is(err, ErrChecksum):
		code = wire.ErrCodeInvalid
	case errors.Is(err, auth.ErrTicketStale):
		code = wire.ErrCodePerm
	}
	return wire.DataResp{Status: code, Msg: err.Error()}
}

// writeChain stores data locally (as generation gen) and, at the same
// time, forwards it to the next datanode of the chain (which checks the
// generation of its own ticket); it succeeds only if both succeed.
func (s *Server) writeChain(next **hop, q *wire.DataReq, data []byte, gen, seq uint64) error {
	store := func() error {
		if q.Op == wire.DataExtend {
			return s.store.Extend(q.Block, int(q.Offset), data, q.Base, q.CRC, gen, seq)
		}
		return s.store.Write(q.Block, data, q.CRC, gen)
	}
	if len(q.Chain) == 0 {
		return store()
	}
	errc := make(chan error, 1)
	go func() { errc <- s.forward(next, q, data) }()
	lerr := store()
	return errors.Join(lerr, <-errc)
}

// forward writes data to the next datanode of q's chain (which forwards it
// further) and waits for its acknowledgement.
func (s *Server) forward(next **hop, q *wire.DataReq, data []byte) error {
	h := q.Chain[0]
	if err := s.sendHop(next, q, data); err != nil {
		return err
	}
	refused, failed := awaitHop(*next)
	if failed != nil {
		(*next).nc.Close()
		*next = nil
		return fmt.Errorf("replica on datanode %s: %w", h.Addr, failed)
	}
	if refused != nil {
		return fmt.Errorf("replica on datanode %s: %w", h.Addr, refused)
	}
	return nil
}

// sendHop writes data to the next datanode of q's chain, connecting to it
// first if needed, without waiting for its acknowledgement. On failure
// the connection is closed (*next is nil).
func (s *Server) sendHop(next **hop, q *wire.DataReq, data []byte) error {
	h := q.Chain[0]
	op := wire.DataWrite // an adopted or re-replicated block travels on as a write
	if q.Op == wire.DataExtend {
		op = wire.DataExtend
	}
	fwd := &wire.DataReq{Op: op, Block: h.Block, Length: q.Length, CRC: q.CRC, Chain: q.Chain[1:], Ticket: h.Ticket, Offset: q.Offset, Base: q.Base, ReqID: q.ReqID}
	if *next != nil && (*next).addr != h.Addr {
		(*next).nc.Close()
		*next = nil
	}
	if *next == nil {
		raw, err := net.DialTimeout("tcp", h.Addr, 10*time.Second)
		if err != nil {
			return fmt.Errorf("forward to datanode %s: %w", h.Addr, err)
		}
		nc, err := auth.Client(raw, s.cfg.Security, s.cfg.Credential, auth.RoleDatanode)
		if err != nil {
			raw.Close()
			return fmt.Errorf("forward to datanode %s: %w", h.Addr, err)
		}
		*next = &hop{addr: h.Addr, nc: nc, r: bufio.NewReader(nc)}
	}
	bufs := net.Buffers{wire.FrameDataHeader(fwd), data}
	if _, err := bufs.WriteTo((*next).nc); err != nil {
		(*next).nc.Close()
		*next = nil
		return fmt.Errorf("replica on datanode %s: %w", h.Addr, err)
	}
	return nil
}
