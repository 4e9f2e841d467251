package kv

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"hash/crc32"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/plasmafs/plasma/internal/connlimit"
)

// Serve answers HTTP/1.1 on ln until Shutdown (then it returns nil).
//
// Plain keep-alive GET and HEAD requests, by far the most frequent, take a
// fast path: the request header is parsed in place and the response
// (status line, headers and the value's bytes straight from the cached
// blocks) leaves in one writev, so a ~30 KB value costs one write system
// call and one wakeup of the client instead of net/http's header write
// plus body writes. Anything else on a connection (other methods, bodies,
// Expect, HTTP/1.0, queries, oversized or unusual headers) hands the whole
// connection, with the bytes already read, to a net/http server running
// ServeHTTP, so every request is still answered by the same handler
// semantics.
func (s *Server) Serve(ln net.Listener) error {
	s.fastMu.Lock()
	if s.hs != nil {
		s.fastMu.Unlock()
		return errors.New("kv: Serve called twice")
	}
	hl := &handoffListener{addr: ln.Addr(), conns: make(chan net.Conn), done: make(chan struct{})}
	s.hs = &http.Server{Handler: s, ReadHeaderTimeout: time.Minute, IdleTimeout: idleTimeout, ConnState: connlimit.ConnState}
	// The shared accept path: it outlasts running out of file descriptors
	// and bounds idle and slow peers (internal/connlimit).
	cl := connlimit.Listen(ln, connlimit.Options{Name: "kv serve"})
	s.hl, s.ln = hl, cl
	s.fastConns = map[*fastConn]struct{}{}
	hs := s.hs
	s.fastMu.Unlock()
	go hs.Serve(hl)
	for {
		c, err := cl.Accept()
		if err != nil {
			if s.shuttingDown.Load() {
				return nil
			}
			return err // the listener was closed under Serve
		}
		// Writes go straight to the TCP connection, so that a response
		// leaves in one writev; reads and Close through c, which keeps
		// the listener's count.
		fc := &fastConn{c: c, w: c.(*connlimit.Conn).NetConn(), br: bufio.NewReaderSize(c, fastHeaderMax)}
		if !s.track(fc, true) {
			c.Close()
			return nil
		}
		go s.serveFast(fc)
	}
}

// Shutdown stops Serve: no new connections, idle ones are closed, busy
// ones after their response; it waits for them until ctx ends.
func (s *Server) Shutdown(ctx context.Context) error {
	s.shuttingDown.Store(true)
	s.fastMu.Lock()
	ln, hl, hs := s.ln, s.hl, s.hs
	for fc := range s.fastConns {
		if fc.idle.Load() {
			fc.c.Close()
		}
	}
	s.fastMu.Unlock()
	if ln == nil {
		return nil
	}
	ln.Close()
	hl.close()
	err := hs.Shutdown(ctx)
	for {
		s.fastMu.Lock()
		n := len(s.fastConns)
		s.fastMu.Unlock()
		if n == 0 {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond): // polls like net/http's Shutdown
		}
	}
}

const (
	// idleTimeout closes a keep-alive connection without requests.
	idleTimeout = 10 * time.Minute
	// fastHeaderMax: a request header that does not fit goes to net/http.
	fastHeaderMax = 8 << 10
)

// fastConn is a connection on the fast path.
type fastConn struct {
	c    net.Conn
	w    net.Conn // what c wraps, for writes
	br   *bufio.Reader
	hdr  []byte      // response header, reused
	bufs net.Buffers // header and value slices for one writev, reused
	idle atomic.Bool // waiting for a request (Shutdown may close it)
}

func (s *Server) track(fc *fastConn, add bool) bool {
	s.fastMu.Lock()
	defer s.fastMu.Unlock()
	if !add {
		delete(s.fastConns, fc)
		return true
	}
	if s.shuttingDown.Load() {
		return false
	}
	s.fastConns[fc] = struct{}{}
	return true
}

func (s *Server) serveFast(fc *fastConn) {
	handed := false
	defer func() {
		if !handed {
			fc.c.Close()
		}
		s.track(fc, false)
	}()
	for {
		fc.idle.Store(true)
		connlimit.SetIdle(fc.c, true)
		if s.shuttingDown.Load() {
			return
		}
		fc.c.SetReadDeadline(time.Now().Add(idleTimeout))
		req, err := fc.readRequest()
		fc.idle.Store(false)
		if err != nil {
			return // EOF, timeout, broken connection, or Shutdown
		}
		connlimit.Admit(fc.c)
		connlimit.SetIdle(fc.c, false)
		if !req.fast {
			fc.c.SetReadDeadline(time.Time{})
			handed = s.hl.give(&prefixConn{Conn: fc.c, r: fc.br})
			return
		}
		if req.head {
			s.counted(http.MethodHead)
		} else {
			s.counted(http.MethodGet)
		}
		if !s.fastGet(fc, req.head, req.key) || req.close {
			return
		}
	}
}

type fastReq struct {
	fast  bool // false: hand the connection to net/http
	head  bool
	close bool // Connection: close
	key   []byte
}

// readRequest reads one request header. A request the fast path does
// not take is left unread in fc.br for net/http.
func (fc *fastConn) readRequest() (fastReq, error) {
	var buf []byte
	for {
		var err error
		if buf, err = fc.br.Peek(fc.br.Buffered()); err != nil {
			return fastReq{}, err
		}
		if end := bytes.Index(buf, []byte("\r\n\r\n")); end >= 0 {
			buf = buf[:end+4]
			break
		}
		if fc.br.Buffered() == fc.br.Size() {
			return fastReq{}, nil // a long header: net/http's business
		}
		if _, err := fc.br.Peek(fc.br.Buffered() + 1); err != nil {
			return fastReq{}, err // a request cut short is not answered
		}
	}
	req, ok := parseFast(buf)
	if !ok {
		return fastReq{}, nil
	}
	// The key may alias the reader's buffer: copy it before discarding.
	req.key = bytes.Clone(req.key)
	fc.br.Discard(len(buf))
	req.fast = true
	return req, nil
}

// parseFast parses a request header ending in an empty line. It accepts
// only what it fully understands: GET or HEAD of an origin-form path with
// no query, HTTP/1.1, a Host header, no body, no Expect or Upgrade, CRLF
// line ends.
func parseFast(h []byte) (fastReq, bool) {
	var r fastReq
	line, rest, _ := bytes.Cut(h, []byte("\r\n"))
	if bytes.IndexByte(line, '\n') >= 0 {
		return r, false
	}
	method, line, _ := bytes.Cut(line, []byte(" "))
	target, proto, _ := bytes.Cut(line, []byte(" "))
	switch string(method) {
	case "GET":
	case "HEAD":
		r.head = true
	default:
		return r, false
	}
	if string(proto) != "HTTP/1.1" || len(target) == 0 || target[0] != '/' {
		return r, false
	}
	esc := false
	for _, c := range target {
		if c <= ' ' || c >= 0x7f || c == '?' || c == '#' {
			return r, false
		}
		esc = esc || c == '%'
	}
	r.key = target[1:]
	if esc {
		k, err := url.PathUnescape(string(target))
		if err != nil {
			return r, false
		}
		r.key = []byte(k[1:])
	}
	host := false
	for len(rest) > 2 {
		line, rest, _ = bytes.Cut(rest, []byte("\r\n"))
		if bytes.IndexByte(line, '\n') >= 0 || line[0] == ' ' || line[0] == '\t' {
			return r, false // bare LF or a folded line
		}
		name, val, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			return r, false
		}
		val = bytes.TrimSpace(val)
		switch {
		case asciiEqualFold(name, "host"):
			if host {
				return r, false
			}
			host = true
		case asciiEqualFold(name, "content-length"):
			if string(val) != "0" {
				return r, false
			}
		case asciiEqualFold(name, "connection"):
			for _, tok := range bytes.Split(val, []byte(",")) {
				tok = bytes.TrimSpace(tok)
				if asciiEqualFold(tok, "close") {
					r.close = true
				} else if asciiEqualFold(tok, "upgrade") {
					return r, false
				}
			}
		case asciiEqualFold(name, "transfer-encoding"), asciiEqualFold(name, "expect"), asciiEqualFold(name, "upgrade"):
			return r, false
		}
	}
	return r, host
}

func asciiEqualFold(b []byte, lower string) bool {
	if len(b) != len(lower) {
		return false
	}
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

// fastGet answers a GET or HEAD; it returns whether the connection can
// take another request.
func (s *Server) fastGet(fc *fastConn, head bool, key []byte) bool {
	for attempt := 0; ; attempt++ {
		snap, err := s.db.snap()
		if err != nil {
			return fc.errorReply(http.StatusServiceUnavailable, head, err)
		}
		keep, err := s.fastServe(fc, head, snap, key)
		snap.Release()
		if err == nil {
			return keep
		}
		// As in get: nothing was sent; a lost snapshot is refreshed once.
		if attempt == 0 && !errors.Is(err, ErrCorrupt) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			rerr := s.recover(ctx, snap)
			cancel()
			if rerr == nil {
				continue
			}
		}
		return fc.errorReply(http.StatusInternalServerError, head, err)
	}
}

// fastServe answers from snap. It returns an error only when nothing has
// been sent yet.
func (s *Server) fastServe(fc *fastConn, head bool, snap *Snapshot, key []byte) (bool, error) {
	v, ok, err := snap.lookup(key)
	if err != nil {
		return false, err
	}
	if !ok {
		fc.startHeader(http.StatusNotFound, "text/plain; charset=utf-8", snap.Version(), int64(len(notFoundBody)))
		return fc.send(head, []byte(notFoundBody)), nil
	}
	fc.startHeader(http.StatusOK, "application/octet-stream", snap.Version(), v.size())
	switch {
	case head:
		return fc.send(true), nil
	case !v.ext:
		return fc.send(false, v.inline), nil
	case v.n <= snap.cachedValueMax():
		parts, err := snap.slices(v.off, v.n)
		if err != nil {
			return false, err
		}
		if err := snap.checkCached(parts, v); err != nil {
			return false, err
		}
		return fc.send(false, parts...), nil
	default:
		// Streamed past the cache, checked as it goes; an error after the
		// header can only cut the response short (the connection closes,
		// and the client sees fewer bytes than Content-Length).
		if _, err := fc.w.Write(fc.hdr); err != nil {
			return false, nil
		}
		snap.acquire()
		val := &Value{s: snap, v: v}
		defer val.Close()
		_, err := val.stream(fc.w)
		return err == nil, nil
	}
}

const notFoundBody = "not found\n"

// errorReply sends status with err's text and says whether the
// connection can go on.
func (fc *fastConn) errorReply(status int, head bool, err error) bool {
	body := []byte(err.Error() + "\n")
	fc.startHeader(status, "text/plain; charset=utf-8", 0, int64(len(body)))
	return fc.send(head, body)
}

// startHeader builds the response header in fc.hdr (version 0: no
// X-KV-Version).
func (fc *fastConn) startHeader(status int, ctype string, version uint64, length int64) {
	h := append(fc.hdr[:0], "HTTP/1.1 "...)
	h = strconv.AppendInt(h, int64(status), 10)
	h = append(h, ' ')
	h = append(h, http.StatusText(status)...)
	h = append(h, "\r\nContent-Type: "...)
	h = append(h, ctype...)
	if status != http.StatusOK {
		h = append(h, "\r\nX-Content-Type-Options: nosniff"...)
	}
	if version != 0 {
		h = append(h, "\r\nX-Kv-Version: "...)
		h = strconv.AppendUint(h, version, 10)
	}
	h = append(h, "\r\nContent-Length: "...)
	h = strconv.AppendInt(h, length, 10)
	h = append(h, "\r\nDate: "...)
	h = append(h, httpDate()...)
	h = append(h, "\r\n\r\n"...)
	fc.hdr = h
}

// send writes the header and body (nothing of it for HEAD) in one writev.
func (fc *fastConn) send(head bool, body ...[]byte) bool {
	b := append(fc.bufs[:0], fc.hdr)
	if !head {
		for _, p := range body {
			if len(p) > 0 {
				b = append(b, p)
			}
		}
	}
	fc.bufs = b[:0]
	_, err := (*net.Buffers)(&b).WriteTo(fc.w)
	clear(fc.bufs[:cap(fc.bufs)]) // drop references to cached blocks
	return err == nil
}

// httpDate is the current time as an HTTP Date header value, formatted
// once a second.
func httpDate() []byte {
	now := time.Now().Unix()
	if d := dateCache.Load(); d != nil && d.sec == now {
		return d.text
	}
	d := &cachedDate{sec: now, text: []byte(time.Unix(now, 0).UTC().Format(http.TimeFormat))}
	dateCache.Store(d)
	return d.text
}

type cachedDate struct {
	sec  int64
	text []byte
}

var dateCache atomic.Pointer[cachedDate]

// checkCached verifies a value served from cached blocks, unless the
// blocks themselves were verified: a PlasmaFS file's blocks are checked
// whole against the block checksums from the namenode by the client
// (client.File.ReadAt, short-circuit or datanode read) every time they are
// read from a disk, and the cache holds only what such a read returned,
// never changed afterwards. So the bytes sent are bytes that were
// verified when they entered the cache; a block evicted and read again
// is verified again. A local file (OpenLocal) has no block checksums:
// there the value's own CRC32C is checked on every request.
func (s *Snapshot) checkCached(parts [][]byte, v vref) error {
	if s.verifiedBlocks {
		return nil
	}
	crc := uint32(0)
	for _, p := range parts {
		crc = crc32.Update(crc, castagnoli, p)
	}
	if crc != v.crc {
		return corruptf("value at %d: checksum mismatch", v.off)
	}
	return nil
}

// handoffListener feeds connections from the fast path to net/http.
type handoffListener struct {
	addr  net.Addr
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func (l *handoffListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// give passes c to net/http; false if it is closed.
func (l *handoffListener) give(c net.Conn) bool {
	select {
	case l.conns <- c:
		return true
	case <-l.done:
		return false
	}
}

func (l *handoffListener) close() { l.once.Do(func() { close(l.done) }) }

func (l *handoffListener) Close() error { l.close(); return nil }

func (l *handoffListener) Addr() net.Addr { return l.addr }

// prefixConn is a connection whose first bytes were already read into r.
type prefixConn struct {
	net.Conn
	r *bufio.Reader
}

// NetConn returns the connection c wraps (for connlimit.ConnState).
func (c *prefixConn) NetConn() net.Conn { return c.Conn }

func (c *prefixConn) Read(p []byte) (int, error) {
	if c.r != nil {
		if c.r.Buffered() > 0 {
			return c.r.Read(p)
		}
		c.r = nil
	}
	return c.Conn.Read(p)
}
