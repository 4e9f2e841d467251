package client

// The datanode transport: pooled data protocol connections (reads,
// pipelined chain writes, in-place extensions, syncs, verification), the
// reading of a block from whichever replica has it intact, and the block
// files of datanodes on this host shared over their Unix sockets for
// short-circuit reads and writes. Both the read path (read.go) and the
// write path (write.go) end here.

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/plasmafs/plasma/internal/auth"
	"github.com/plasmafs/plasma/internal/blockcrc"
	"github.com/plasmafs/plasma/internal/wire"
)

// dataConn is one data protocol connection to a datanode.
type dataConn struct {
	addr string
	nc   net.Conn
	r    *bufio.Reader
	w    *bufio.Writer
	stop func() bool // ends the watch of the current caller's context
	// reused: taken from the idle pool. Its datanode may have closed it
	// meanwhile (restarted, or dropped it as idle): a request that gets
	// no answer on it is sent again on a new connection (retryStale).
	reused bool
}

// watch makes the caller's cancellation or deadline interrupt the
// connection's reads and writes (a datanode that stopped answering must
// not hold the caller); put ends it.
func (dc *dataConn) watch(ctx context.Context) {
	if dl, ok := ctx.Deadline(); ok {
		dc.nc.SetDeadline(dl)
	} else {
		dc.nc.SetDeadline(time.Time{})
	}
	dc.stop = context.AfterFunc(ctx, func() { dc.nc.SetDeadline(time.Now()) })
}

// ctxErr prefers the caller's context error to the I/O error it caused.
func ctxErr(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("%w (%v)", cerr, err)
	}
	return err
}

// noAnswerError is a request that got no answer from the datanode (it
// could not be reached, or the connection failed): nothing is known about
// what it was asked.
type noAnswerError struct{ err error }

func (e noAnswerError) Error() string { return e.err.Error() }
func (e noAnswerError) Unwrap() error { return e.err }

// dataPool keeps idle data connections per datanode address.
type dataPool struct {
	c    *Client
	mu   sync.Mutex
	idle map[string][]*dataConn
}

func newDataPool(c *Client) *dataPool { return &dataPool{c: c, idle: map[string][]*dataConn{}} }

func (p *dataPool) get(ctx context.Context, addr string) (*dataConn, error) {
	p.mu.Lock()
	if l := p.idle[addr]; len(l) > 0 {
		dc := l[len(l)-1]
		p.idle[addr] = l[:len(l)-1]
		p.mu.Unlock()
		dc.reused = true
		return dc, nil
	}
	p.mu.Unlock()
	return p.dial(ctx, addr)
}

// dial opens a new connection to addr.
func (p *dataPool) dial(ctx context.Context, addr string) (*dataConn, error) {
	d := net.Dialer{Timeout: 10 * time.Second}
	raw, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("datanode %s: %w", addr, err)
	}
	nc, err := auth.Client(raw, p.c.dataLevel, p.c.cred, auth.RoleDatanode)
	if err != nil {
		raw.Close()
		return nil, fmt.Errorf("datanode %s: %w", addr, err)
	}
	return &dataConn{addr: addr, nc: nc, r: bufio.NewReaderSize(nc, 256<<10), w: bufio.NewWriterSize(nc, 256<<10)}, nil
}

func (p *dataPool) put(dc *dataConn) {
	if dc.stop != nil && !dc.stop() {
		dc.nc.Close() // interrupted: its deadline is spent
		return
	}
	dc.stop = nil
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.idle[dc.addr]) < 16 {
		p.idle[dc.addr] = append(p.idle[dc.addr], dc)
		return
	}
	dc.nc.Close()
}

func (p *dataPool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range p.idle {
		for _, dc := range l {
			dc.nc.Close()
		}
	}
	p.idle = map[string][]*dataConn{}
}

// roundTrip sends a request without data and reads the response header.
func (p *dataPool) roundTrip(ctx context.Context, addr string, q *wire.DataReq) (*dataConn, *wire.DataResp, error) {
	return p.roundTripData(ctx, addr, q, nil)
}

// retryStale runs a request with send on a connection to addr; if it
// failed on an idle connection without an answer (answered false), the
// datanode had closed it, and send runs once more on a new one. The
// requests are idempotent (a write stores the same bytes again).
func (p *dataPool) retryStale(ctx context.Context, addr string, send func(*dataConn) (answered bool, err error)) error {
	dc, err := p.get(ctx, addr)
	if err != nil {
		return err
	}
	answered, err := send(dc)
	if err == nil || answered || !dc.reused || ctx.Err() != nil {
		return err
	}
	if dc, err = p.dial(ctx, addr); err != nil {
		return err
	}
	_, err = send(dc)
	return err
}

// roundTripData sends a request followed by data and reads the response
// header.
func (p *dataPool) roundTripData(ctx context.Context, addr string, q *wire.DataReq, data []byte) (*dataConn, *wire.DataResp, error) {
	var out *dataConn
	var resp *wire.DataResp
	err := p.retryStale(ctx, addr, func(dc *dataConn) (bool, error) {
		var err error
		resp, err = p.sendOn(ctx, dc, q, data)
		out = dc
		return resp != nil, err
	})
	if err != nil {
		return nil, nil, err
	}
	return out, resp, nil
}

// sendOn sends a request followed by data on dc and reads the response
// header; on failure it closes dc.
func (p *dataPool) sendOn(ctx context.Context, dc *dataConn, q *wire.DataReq, data []byte) (*wire.DataResp, error) {
	dc.watch(ctx)
	err := wire.WriteDataReq(dc.w, q)
	if err == nil && len(data) > 0 {
		_, err = dc.w.Write(data)
	}
	if err == nil {
		err = dc.w.Flush()
	}
	var resp *wire.DataResp
	if err == nil {
		resp, err = wire.ReadDataResp(dc.r)
	}
	if err != nil {
		dc.nc.Close()
		return nil, ctxErr(ctx, fmt.Errorf("datanode %s: %w", dc.addr, err))
	}
	return resp, nil
}

// readBlock reads one block into buf (len ≥ blocksize) and checks it
// against want. With 0 < valid < len(buf) (the file ends in the block),
// the datanode checks only the first valid bytes: bytes past them may be
// a later version's, the block having been extended in place since
// (datanode.BlockStore.Extend). A block whose checksum covers more than
// its valid bytes (its file was truncated without rewriting it) fails
// that check and is read whole.
func (p *dataPool) readBlock(ctx context.Context, req uint64, addr string, block uint64, ticket []byte, buf []byte, want uint32, valid int) error {
	q := &wire.DataReq{Op: wire.DataRead, Block: block, Ticket: ticket, ReqID: req}
	if valid > 0 && valid < len(buf) {
		q.Length, q.CRC = uint32(valid), want
	}
	dc, resp, err := p.roundTrip(ctx, addr, q)
	if err != nil {
		return err
	}
	if resp.Status == wire.ErrCodeInvalid && q.Length > 0 {
		p.put(dc)
		if err := p.readBlock(ctx, req, addr, block, ticket, buf, want, 0); err != nil {
			// Say why the version's own bytes were not enough first.
			return fmt.Errorf("datanode %s: %s; read whole: %w", addr, resp.Msg, err)
		}
		return nil
	}
	if resp.Status != wire.OK {
		p.put(dc)
		return fmt.Errorf("datanode %s: %s", addr, resp.Msg)
	}
	if int(resp.Length) > len(buf) {
		dc.nc.Close()
		return fmt.Errorf("datanode %s: block of %d bytes, expected %d", addr, resp.Length, len(buf))
	}
	if _, err := io.ReadFull(dc.r, buf[:resp.Length]); err != nil {
		dc.nc.Close()
		return ctxErr(ctx, fmt.Errorf("datanode %s: %w", addr, err))
	}
	p.put(dc)
	clear(buf[resp.Length:]) // the block's tail, not sent: zeros
	if got := checksum(buf[:resp.Length], len(buf)); got != want {
		return fmt.Errorf("%w: datanode %s block %d has CRC %08x, committed %08x", ErrChecksum, addr, block, got, want)
	}
	return nil
}

// checksum is the CRC32C of a block of blocksize bytes that starts with
// data and is zero-padded (the datanode computes the same).
func checksum(data []byte, blocksize int) uint32 { return blockcrc.Checksum(data, blocksize) }

// location is one replica of a block, as the reader needs it.
type location struct {
	addr   string
	block  uint64
	node   string
	info   wire.NodeInfo
	ticket []byte
	// valid is how much of the block lies before the end of the file:
	// the rest is zeros, so a short-circuit reader need not read it.
	valid int
}

// readReplicas reads block idx of the file called name (blocksize bs)
// (inode ino) from its replicas locs until one returns data matching the
// committed checksum; a replica failing it is reported (reportDamaged). It needs no lock.
func (tx *Txn) readReplicas(ctx context.Context, name string, ino, idx uint64, locs []location, crc uint32, buf []byte, bs int) error {
	var errs []string
	for _, l := range locs {
		if lf := tx.c.localFile(l.info); lf != nil {
			// Short-circuit: read the local datanode's block file directly,
			// the part before the end of the file (whole pages, as the
			// datanode stores it); a block that is not all there fails the
			// checksum and is read from the datanode, which knows.
			// Bytes past the valid ones may be a later version's (an
			// extension in place): they do not count.
			if _, err := lf.ReadAt(buf[:l.valid], int64(l.block)*int64(bs)); err == nil {
				clear(buf[l.valid:bs])
				if checksum(buf[:l.valid], bs) == crc {
					return nil
				}
			}
		}
		if l.addr == "" {
			// The namenode knows no address: the datanode has not
			// registered since the namenode started. Dialing "" would
			// only say "missing address".
			errs = append(errs, fmt.Sprintf("datanode %s has not registered with the namenode since the namenode started (datanodes register within seconds of a namenode restart or failover: run the command again; 'plasma admin datanodes' shows them)", l.node))
			continue
		}
		err := tx.c.data.readBlock(ctx, tx.reqID(), l.addr, l.block, l.ticket, buf, crc, l.valid)
		if err == nil {
			return nil
		}
		if cerr := ctx.Err(); cerr != nil {
			return fmt.Errorf("%s: block %d: %w", name, idx, cerr)
		}
		if !l.info.Alive {
			// Whatever answered at its address (nothing, or another
			// process that now has it), the replica's datanode is down.
			errs = append(errs, fmt.Sprintf("datanode %s (%s) is down: the namenode has no heartbeat from it (%v)", l.node, l.addr, err))
			continue
		}
		tx.reportDamaged(ctx, ino, idx, l, crc, err)
		errs = append(errs, err.Error())
	}
	return fmt.Errorf("%s: block %d unreadable on every replica: %s (request %s)", name, idx, strings.Join(errs, "; "), wire.FormatReqID(tx.reqID()))
}

// writeError is a failed chain write and the datanodes to blame for it.
type writeError struct {
	blame []string // addresses
	err   error
}

func (e *writeError) Error() string { return e.err.Error() }
func (e *writeError) Unwrap() error { return e.err }

// blameFor finds which datanodes of a chain a datanode's error message
// names (a forwarding failure names the next hop); otherwise the first.
func blameFor(addrs []string, msg string) []string {
	var out []string
	for _, a := range addrs[1:] {
		if strings.Contains(msg, a) {
			out = append(out, a)
		}
	}
	if len(out) == 0 {
		out = addrs[:1]
	}
	return out
}

// writeRun writes blocks to consecutive block numbers starting at each
// replica's start: the data goes to the first replica, which forwards it
// along the chain. Requests are pipelined; the acknowledgements are read as
// they come.
//
// With local set (the block file of the first datanode, shared with this
// client because it runs on the same host), the client stores each block
// itself and the datanode only verifies it, records its checksum and
// forwards it: the data never crosses a socket to the first replica.
func (p *dataPool) writeRun(ctx context.Context, req uint64, addrs []string, starts []uint64, tickets [][]byte, blocks [][]byte, crcs []uint32, bs int, local *os.File) error {
	err := p.retryStale(ctx, addrs[0], func(dc *dataConn) (bool, error) {
		return p.writeRunOn(ctx, req, dc, addrs, starts, tickets, blocks, crcs, bs, local)
	})
	var we *writeError
	if err != nil && !errors.As(err, &we) {
		err = &writeError{addrs[:1], err}
	}
	return err
}

// writeRunOn is writeRun on dc; answered says whether any answer came.
func (p *dataPool) writeRunOn(ctx context.Context, req uint64, dc *dataConn, addrs []string, starts []uint64, tickets [][]byte, blocks [][]byte, crcs []uint32, bs int, local *os.File) (answered bool, err error) {
	dc.watch(ctx)
	errc := make(chan error, 1)
	go func() {
		var err error
		for i, b := range blocks {
			q := &wire.DataReq{Op: wire.DataWrite, Block: starts[0] + uint64(i), Length: uint32(len(b)), CRC: crcs[i], Ticket: ticketAt(tickets, 0), ReqID: req}
			for k := 1; k < len(addrs); k++ {
				q.Chain = append(q.Chain, wire.Hop{Addr: addrs[k], Block: starts[k] + uint64(i), Ticket: ticketAt(tickets, k)})
			}
			if local != nil {
				// The buffer is a whole, zero-padded block; like the
				// datanode, write its data up to a page boundary only.
				n := min(bs, (len(b)+4095)/4096*4096)
				if _, err = local.WriteAt(b[:n], int64(q.Block)*int64(bs)); err != nil {
					err = fmt.Errorf("local write of block %d: %w", q.Block, err)
					break
				}
				q.Op = wire.DataAdopt
				if _, err = dc.nc.Write(wire.FrameDataHeader(q)); err != nil {
					break
				}
				continue
			}
			// Header and block in one writev, without copying the block.
			bufs := net.Buffers{wire.FrameDataHeader(q), b}
			if _, err = bufs.WriteTo(dc.nc); err != nil {
				break
			}
		}
		errc <- err
	}()
	var firstErr error
	for i := range blocks {
		resp, err := wire.ReadDataResp(dc.r)
		if err != nil {
			dc.nc.Close()
			<-errc
			return i > 0, &writeError{addrs[:1], ctxErr(ctx, fmt.Errorf("datanode %s: %w", addrs[0], err))}
		}
		if resp.Status != wire.OK && firstErr == nil {
			firstErr = &writeError{blameFor(addrs, resp.Msg), fmt.Errorf("datanode %s: block %d: %s", addrs[0], starts[0]+uint64(i), resp.Msg)}
		}
	}
	if err := <-errc; err != nil {
		dc.nc.Close()
		return true, &writeError{addrs[:1], fmt.Errorf("datanode %s: %w", addrs[0], err)}
	}
	p.put(dc)
	return true, firstErr
}

// replicaAddrs returns the data addresses of x's replicas and the first
// block of each.
func (c *Client) replicaAddrs(x wire.Extent) ([]string, []uint64) {
	addrs := make([]string, len(x.Replicas))
	starts := make([]uint64, len(x.Replicas))
	for k, rp := range x.Replicas {
		info, _ := c.node(rp.Node)
		addrs[k], starts[k] = info.Addr, rp.Start
	}
	return addrs, starts
}

// wroteTo records datanodes the transaction wrote to: its commit makes
// their writes durable first.
func (tx *Txn) wroteTo(addrs []string) {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	tx.unjournaled = true
	if len(addrs) < 2 {
		tx.singleCopy = true
	}
	if tx.nodes == nil {
		tx.nodes = map[string]bool{}
	}
	for _, a := range addrs {
		tx.nodes[a] = true
	}
}

// extend writes data at offset off of a committed block on every replica
// in addrs (the first forwards it along the chain), in place: base is the
// block's committed checksum, crc the checksum of the result.
func (p *dataPool) extend(ctx context.Context, req uint64, addrs []string, starts []uint64, tickets [][]byte, off int, data []byte, base, crc uint32) error {
	q := &wire.DataReq{Op: wire.DataExtend, Block: starts[0], Length: uint32(len(data)), CRC: crc, Ticket: ticketAt(tickets, 0), Offset: uint32(off), Base: base, ReqID: req}
	for k := 1; k < len(addrs); k++ {
		q.Chain = append(q.Chain, wire.Hop{Addr: addrs[k], Block: starts[k], Ticket: ticketAt(tickets, k)})
	}
	dc, resp, err := p.roundTripData(ctx, addrs[0], q, data)
	if err != nil {
		return err
	}
	p.put(dc)
	if resp.Status != wire.OK {
		return fmt.Errorf("datanode %s: extend block %d: %s", addrs[0], starts[0], resp.Msg)
	}
	return nil
}

// syncAll makes the writes on every datanode in addrs durable and returns
// the datanodes where that failed, with their errors.
func (p *dataPool) syncAll(ctx context.Context, addrs map[string]bool) map[string]error {
	var wg sync.WaitGroup
	var mu sync.Mutex
	failed := map[string]error{}
	for a := range addrs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dc, resp, err := p.roundTrip(ctx, a, &wire.DataReq{Op: wire.DataSync})
			if err == nil {
				p.put(dc)
				if resp.Status != wire.OK {
					err = fmt.Errorf("datanode %s: sync: %s", a, resp.Msg)
				}
			} else {
				err = fmt.Errorf("sync: %w", err)
			}
			if err != nil {
				mu.Lock()
				failed[a] = err
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return failed
}

func ticketAt(ts [][]byte, i int) []byte {
	if i < len(ts) {
		return ts[i]
	}
	return nil
}

// verify asks the datanode at addr to check count blocks from start
// against their checksums; it returns the bad ones and the checksums the
// datanode holds. A request that got no answer fails with a noAnswerError.
func (p *dataPool) verify(ctx context.Context, addr string, start, count uint64, ticket []byte) ([]uint64, []uint32, error) {
	dc, resp, err := p.roundTrip(ctx, addr, &wire.DataReq{Op: wire.DataVerify, Block: start, Count: uint32(count), Ticket: ticket})
	if err != nil {
		return nil, nil, noAnswerError{err}
	}
	p.put(dc)
	if resp.Status != wire.OK {
		return nil, nil, errors.New(resp.Msg)
	}
	return resp.Bad, resp.CRCs, nil
}

// localFiles holds block files of datanodes on this machine, obtained from
// the datanode over its Unix socket, for short-circuit reads and writes.
// Reads use a read-only descriptor; the writable one is asked for only
// when this client writes there (with a write ticket).
type localFiles struct {
	mu       sync.Mutex
	files    map[string]*os.File // read-only, by identity
	writable map[string]*os.File // read-write, by identity
	failed   map[string]bool     // no short-circuit to this datanode
}

// Requests of the datanode's local protocol (internal/datanode/local.go).
const (
	localRead    = 'R'
	localWrite   = 'W'
	localRefused = '!'
)

// isLocal reports whether datanode n runs on this host with a socket.
func (c *Client) isLocal(n wire.NodeInfo) bool {
	return !c.cfg.NoShortCircuit && n.Socket != "" && n.Host == c.host
}

// localFile returns a read-only descriptor of the block file of datanode n
// if it runs on this host.
func (c *Client) localFile(n wire.NodeInfo) *os.File {
	if !c.isLocal(n) {
		return nil
	}
	lf := &c.local
	lf.mu.Lock()
	defer lf.mu.Unlock()
	if f := lf.files[n.Identity]; f != nil {
		return f
	}
	if lf.failed[n.Identity] {
		return nil
	}
	f, err := fetchFD(n.Socket, n.Identity, []byte{localRead})
	if err != nil {
		lf.fail(n.Identity)
		return nil
	}
	if lf.files == nil {
		lf.files = map[string]*os.File{}
	}
	lf.files[n.Identity] = f
	return f
}

// localWriteFile returns a writable descriptor of the block file of
// datanode n if it runs on this host; the datanode hands it out only
// against a write ticket (here: for block) on it. Without one (nil), or if
// the datanode refuses, the client writes over the socket.
func (c *Client) localWriteFile(n wire.NodeInfo, block uint64, ticket []byte) *os.File {
	if !c.isLocal(n) || len(ticket) > 0xffff {
		return nil
	}
	lf := &c.local
	lf.mu.Lock()
	defer lf.mu.Unlock()
	if f := lf.writable[n.Identity]; f != nil {
		return f
	}
	if lf.failed[n.Identity] {
		return nil
	}
	req := []byte{localWrite}
	req = binary.LittleEndian.AppendUint64(req, block)
	req = binary.LittleEndian.AppendUint16(req, uint16(len(ticket)))
	f, err := fetchFD(n.Socket, n.Identity, append(req, ticket...))
	if err != nil {
		// A refused ticket may be fresher next time; an unreachable
		// socket is not retried.
		if !errors.Is(err, errLocalRefused) {
			lf.fail(n.Identity)
		}
		return nil
	}
	if lf.writable == nil {
		lf.writable = map[string]*os.File{}
	}
	lf.writable[n.Identity] = f
	return f
}

var errLocalRefused = errors.New("datanode refused the descriptor")

func (lf *localFiles) fail(identity string) {
	if lf.failed == nil {
		lf.failed = map[string]bool{}
	}
	lf.failed[identity] = true
}

// fetchFD sends req on the datanode's socket and receives the block file's
// descriptor.
func fetchFD(sock, identity string, req []byte) (*os.File, error) {
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write(req); err != nil {
		return nil, err
	}
	buf := make([]byte, 512)
	oob := make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := c.ReadMsgUnix(buf, oob)
	if err != nil {
		return nil, err
	}
	if oobn == 0 {
		if n > 0 && buf[0] == localRefused {
			return nil, fmt.Errorf("%w: %s: %s", errLocalRefused, sock, buf[1:n])
		}
		return nil, fmt.Errorf("no descriptor from %s", sock)
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		return nil, fmt.Errorf("no descriptor from %s", sock)
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return nil, fmt.Errorf("no descriptor from %s", sock)
	}
	f := os.NewFile(uintptr(fds[0]), sock)
	if string(buf[:n]) != identity {
		f.Close()
		return nil, fmt.Errorf("%s serves volume %s, expected %s", sock, buf[:n], identity)
	}
	return f, nil
}

func (lf *localFiles) close() {
	lf.mu.Lock()
	defer lf.mu.Unlock()
	for _, f := range lf.files {
		f.Close()
	}
	for _, f := range lf.writable {
		f.Close()
	}
	lf.files, lf.writable = nil, nil
}
