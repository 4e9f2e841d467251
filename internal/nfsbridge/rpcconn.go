package nfsbridge

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"log"
	"net"
	"runtime/debug"
	"sync"

	"github.com/plasmafs/plasma/internal/connlimit"
)

// ONC RPC (RFC 5531) constants the interceptor needs.
const (
	progNFS   = 100003
	progMount = 100005

	rpcCall       = 0
	rpcReply      = 1
	msgAccepted   = 0
	acceptSuccess = 0
	progUnavail   = 1
	progMismatch  = 2
	procUnavail   = 3
	garbageArgs   = 4
	systemErr     = 5

	lastFragment = 1 << 31
	// acceptForward is no RPC accept status: a handler returns it to
	// pass the call on to go-nfs unchanged.
	acceptForward = 1 << 31
	// maxRecord bounds one request: a WRITE carries at most the 1 MiB
	// FSINFO advertises (go-nfs: wtmax), plus headers.
	maxRecord = 4 << 20
)

// rpcCallHeader is the part of an RPC call the interceptor routes by.
type rpcCallHeader struct {
	xid, prog, vers, proc uint32
	// unix is the caller's AUTH_UNIX credential (RFC 5531 appendix A),
	// when the call carries one.
	unix *authUnix
}

// authUnix is what an AUTH_UNIX (AUTH_SYS) credential says about the
// caller. Nothing proves it: as for any NFS server with sec=sys, the
// client machine is trusted to name its user.
type authUnix struct {
	uid, gid uint32
}

const authUnixFlavor = 1

// parseAuthUnix reads an AUTH_UNIX credential body; nil if malformed.
func parseAuthUnix(body []byte) *authUnix {
	d := xdrDecoder{b: body}
	d.u32() // stamp
	if machine := d.opaque(); len(machine) > 255 {
		return nil
	}
	a := &authUnix{uid: d.u32(), gid: d.u32()}
	if n := d.u32(); n > 16 {
		return nil
	}
	if d.err != nil {
		return nil
	}
	return a
}

// procHandler answers one intercepted procedure: it gets the arguments
// and returns the procedure's results (after the accepted-reply header),
// or an accept status other than success with no results, or
// acceptForward to hand the call to go-nfs after all (a check passed).
type procHandler func(args []byte) (results []byte, accept uint32)

// interceptor puts our own implementations of some procedures in front of
// go-nfs. go-nfs's handler registry takes functions of an unexported
// type, so its broken procedures (see the package comment) cannot be
// replaced from outside the package; instead every connection passes
// through this layer, which reads whole RPC records, answers the ones it
// has a handler for and hands the rest to go-nfs unchanged.
type interceptor struct {
	route func(h rpcCallHeader) procHandler
}

// listener wraps l so that go-nfs serves the connections it accepts
// through the interceptor.
func (ic *interceptor) listener(l net.Listener) net.Listener {
	return &rpcListener{Listener: l, ic: ic}
}

type rpcListener struct {
	net.Listener
	ic *interceptor
}

func (l *rpcListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	pr, pw := io.Pipe()
	rc := &rpcConn{Conn: c, in: pr}
	go rc.pump(l.ic, pw)
	return rc, nil
}

// rpcConn is the connection go-nfs sees: it reads the records the
// interceptor passes on, and its writes reach the client as whole records,
// never interleaved with the interceptor's own replies.
type rpcConn struct {
	net.Conn
	in *io.PipeReader

	wmu     sync.Mutex // orders whole records on Conn
	pending []byte     // go-nfs's partial output (a record not yet whole)
}

func (c *rpcConn) Read(p []byte) (int, error) { return c.in.Read(p) }

func (c *rpcConn) Close() error {
	c.in.Close()
	return c.Conn.Close()
}

// Write collects go-nfs's output and sends each complete fragment at
// once, under the same lock as the interceptor's replies.
func (c *rpcConn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.pending = append(c.pending, p...)
	for len(c.pending) >= 4 {
		n := int(binary.BigEndian.Uint32(c.pending) &^ lastFragment)
		if len(c.pending) < 4+n {
			break
		}
		if _, err := c.Conn.Write(c.pending[:4+n]); err != nil {
			return 0, err
		}
		c.pending = c.pending[4+n:]
	}
	if len(c.pending) == 0 {
		c.pending = nil
	}
	return len(p), nil
}

func (c *rpcConn) writeRecord(rec []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, err := c.Conn.Write(rec)
	return err
}

// pump reads the client's records; it answers those the interceptor
// routes and writes the others, as single-fragment records, to go-nfs.
func (c *rpcConn) pump(ic *interceptor, toNFS *io.PipeWriter) {
	defer c.Conn.Close()
	r := bufio.NewReaderSize(c.Conn, 64<<10)
	var seen seenCalls
	for first := true; ; first = false {
		rec, err := readRecord(r)
		if err != nil {
			toNFS.CloseWithError(err)
			return
		}
		if first {
			connlimit.Admit(c.Conn) // a whole first request: no longer an idle newcomer
		}
		h, args, verdict := parseCall(rec)
		var handle procHandler
		switch verdict {
		case callOK:
			if seen.retransmitted(h.xid) {
				continue // answered, or being answered, on this connection
			}
			handle = ic.route(h)
		case callNotCall:
			// Not an RPC call at all: nothing to answer, and go-nfs
			// would stop reading without closing the connection.
			toNFS.CloseWithError(errNotCall)
			return
		default:
			if err := c.writeRecord(deniedRecord(h.xid, verdict)); err != nil {
				toNFS.CloseWithError(err)
				return
			}
			continue
		}
		if handle == nil {
			if err := writeFragment(toNFS, rec); err != nil {
				return
			}
			continue
		}
		res, accept := serve(handle, args)
		if accept == acceptForward {
			if err := writeFragment(toNFS, rec); err != nil {
				return
			}
			continue
		}
		if err := c.writeRecord(replyRecord(h.xid, accept, res)); err != nil {
			toNFS.CloseWithError(err)
			return
		}
	}
}

// serve runs a handler; a panic (a bug, never the client's doing) is
// answered SYSTEM_ERR instead of taking the bridge down.
func serve(handle procHandler, args []byte) (res []byte, accept uint32) {
	defer func() {
		if r := recover(); r != nil {
			log.Printf("plasma nfs: internal error (answered SYSTEM_ERR): %v\n%s", r, debug.Stack())
			res, accept = nil, systemErr
		}
	}()
	return handle(args)
}

var errRecordTooLarge = errors.New("nfs: RPC record too large")

// readRecord reads one RPC record (all its fragments).
func readRecord(r io.Reader) ([]byte, error) {
	var rec []byte
	var hdr [4]byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return nil, err
		}
		v := binary.BigEndian.Uint32(hdr[:])
		n := int(v &^ lastFragment)
		if len(rec)+n > maxRecord {
			return nil, errRecordTooLarge
		}
		start := len(rec)
		rec = append(rec, make([]byte, n)...)
		if _, err := io.ReadFull(r, rec[start:]); err != nil {
			return nil, err
		}
		if v&lastFragment != 0 {
			return rec, nil
		}
	}
}

func writeFragment(w io.Writer, rec []byte) error {
	out := make([]byte, 4+len(rec))
	binary.BigEndian.PutUint32(out, uint32(len(rec))|lastFragment)
	copy(out[4:], rec)
	_, err := w.Write(out)
	return err
}

// What parseCall makes of a record.
const (
	callOK      = iota
	callNotCall // not a call (or not even a message): the connection is closed
	callBadVersion
	callBadAuth
	callGarbage
)

var errNotCall = errors.New("nfs: a record that is not an RPC call")

// maxAuth is the largest credential or verifier body (RFC 5531).
const maxAuth = 400

// parseCall splits an RPC call into its header and its arguments. Only
// well-formed version-2 calls reach go-nfs (it would stop reading a
// connection on anything else and leave the client waiting forever); the
// others are answered here or close the connection.
func parseCall(rec []byte) (h rpcCallHeader, args []byte, verdict int) {
	d := xdrDecoder{b: rec}
	h.xid = d.u32()
	mtype := d.u32()
	if d.err != nil || mtype != rpcCall {
		return h, nil, callNotCall
	}
	if rpcvers := d.u32(); d.err == nil && rpcvers != 2 {
		return h, nil, callBadVersion
	}
	h.prog, h.vers, h.proc = d.u32(), d.u32(), d.u32()
	flavor := d.u32()
	cred := d.opaque()
	if flavor == authUnixFlavor && d.err == nil {
		h.unix = parseAuthUnix(cred)
	}
	d.u32() // verifier flavor
	verf := d.opaque()
	switch {
	case d.err != nil:
		return h, nil, callGarbage
	case len(cred) > maxAuth || len(verf) > maxAuth:
		return h, nil, callBadAuth
	}
	return h, d.b, callOK
}

// deniedRecord answers a call that cannot be served: MSG_DENIED for a
// wrong RPC version or credential, GARBAGE_ARGS for a truncated header.
func deniedRecord(xid uint32, verdict int) []byte {
	if verdict == callGarbage {
		return replyRecord(xid, garbageArgs, nil)
	}
	var e xdrEncoder
	e.u32(0) // record mark
	e.u32(xid)
	e.u32(rpcReply)
	e.u32(1) // MSG_DENIED
	if verdict == callBadVersion {
		e.u32(0) // RPC_MISMATCH: versions 2 to 2
		e.u32(2)
		e.u32(2)
	} else {
		e.u32(1) // AUTH_ERROR
		e.u32(1) // AUTH_BADCRED
	}
	binary.BigEndian.PutUint32(e.b, uint32(len(e.b)-4)|lastFragment)
	return e.b
}

// replyRecord is an accepted reply (null verifier) as one record.
func replyRecord(xid, accept uint32, res []byte) []byte {
	var e xdrEncoder
	e.u32(0) // record mark, set below
	e.u32(xid)
	e.u32(rpcReply)
	e.u32(msgAccepted)
	e.u32(0) // AUTH_NONE verifier
	e.u32(0)
	e.u32(accept)
	if accept == progMismatch {
		e.u32(3) // the one version served
		e.u32(3)
	}
	e.b = append(e.b, res...)
	binary.BigEndian.PutUint32(e.b, uint32(len(e.b)-4)|lastFragment)
	return e.b
}

// ---- XDR (RFC 4506), the handful of types the handlers read and write

var errShort = errors.New("xdr: short arguments")

type xdrDecoder struct {
	b   []byte
	err error
}

func (d *xdrDecoder) u32() uint32 {
	if d.err != nil || len(d.b) < 4 {
		d.err = errShort
		return 0
	}
	v := binary.BigEndian.Uint32(d.b)
	d.b = d.b[4:]
	return v
}

func (d *xdrDecoder) u64() uint64 {
	hi := d.u32()
	return uint64(hi)<<32 | uint64(d.u32())
}

// opaque reads variable-length opaque data (and its padding).
func (d *xdrDecoder) opaque() []byte {
	n := int(d.u32())
	if d.err != nil {
		return nil
	}
	padded := (n + 3) &^ 3
	if n < 0 || padded > len(d.b) {
		d.err = errShort
		return nil
	}
	v := d.b[:n]
	d.b = d.b[padded:]
	return v
}

// fixed reads n bytes of fixed-length opaque data (n a multiple of 4).
func (d *xdrDecoder) fixed(n int) []byte {
	if d.err != nil || len(d.b) < n {
		d.err = errShort
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

type xdrEncoder struct{ b []byte }

func (e *xdrEncoder) u32(v uint32) { e.b = binary.BigEndian.AppendUint32(e.b, v) }

func (e *xdrEncoder) opaque(v []byte) {
	e.u32(uint32(len(v)))
	e.b = append(e.b, v...)
	for len(e.b)%4 != 0 {
		e.b = append(e.b, 0)
	}
}

// Write lets go-nfs's attribute encoders (WriteWcc, WritePostOpAttrs)
// append to the encoder.
func (e *xdrEncoder) Write(p []byte) (int, error) {
	e.b = append(e.b, p...)
	return len(p), nil
}
