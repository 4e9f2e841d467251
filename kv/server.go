package kv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// ServerOptions tune a Server.
type ServerOptions struct {
	// RefreshInterval refreshes the snapshot this often (0: only on
	// POST /-/refresh and after the server's own writes).
	RefreshInterval time.Duration
	// Writable enables PUT and DELETE.
	Writable bool
	// BatchDelay is how long a write batch waits for more requests
	// before it commits (default 10ms); MaxBatch bounds its requests
	// (default 1000).
	BatchDelay time.Duration
	MaxBatch   int
	// MaxBufferedBody: PUT bodies up to this size (by Content-Length) are
	// read before they join a batch, larger ones are streamed into the
	// database in a batch of their own (default 1 MiB).
	MaxBufferedBody int64
	// OnRequest, if set, is told the method of every request served (for
	// metrics).
	OnRequest func(method string)
}

// Server serves a database over HTTP:
//
//	GET /KEY          the value (404 if absent), streamed
//	HEAD /KEY         its headers: Content-Length, X-KV-Version
//	POST /-/refresh   make the newest committed version current
//	PUT /KEY          insert or replace (ServerOptions.Writable)
//	DELETE /KEY       delete (ServerOptions.Writable)
//
// KEY is the URL path without its leading slash, percent-decoded, so any
// byte string can be a key. Each request reads the snapshot current when
// it starts; requests run concurrently on all cores (net/http gives one
// goroutine per connection, with keep-alive). Writes from concurrent
// requests are collected into batches, each one PlasmaFS transaction, and
// answered once it is committed; the snapshot is then refreshed, so a
// client sees its own write.
type Server struct {
	db     *DB
	opt    ServerOptions
	writes chan *writeReq
	stop   chan struct{}
	wg     sync.WaitGroup
	once   sync.Once

	recoverMu sync.Mutex

	// Serve's connections (fastserve.go).
	fastMu       sync.Mutex
	hs           *http.Server // takes the connections the fast path hands over
	hl           *handoffListener
	ln           net.Listener
	fastConns    map[*fastConn]struct{}
	shuttingDown atomic.Bool
}

type writeReq struct {
	key    []byte
	del    bool
	value  []byte    // buffered body
	stream io.Reader // streamed body (value nil)
	done   chan error
}

// NewServer returns a server for db; Close stops its background work
// (the caller closes db).
func NewServer(db *DB, opt ServerOptions) *Server {
	if opt.BatchDelay <= 0 {
		opt.BatchDelay = 10 * time.Millisecond
	}
	if opt.MaxBatch <= 0 {
		opt.MaxBatch = 1000
	}
	if opt.MaxBufferedBody <= 0 {
		opt.MaxBufferedBody = 1 << 20
	}
	s := &Server{db: db, opt: opt, writes: make(chan *writeReq), stop: make(chan struct{})}
	if opt.RefreshInterval > 0 {
		s.wg.Add(1)
		go s.refresher()
	}
	if opt.Writable {
		s.wg.Add(1)
		go s.batcher()
	}
	return s
}

// Close stops the refresher and the write batcher; writes still queued
// fail with 503.
func (s *Server) Close() error {
	s.once.Do(func() { close(s.stop) })
	s.wg.Wait()
	return nil
}

func (s *Server) refresher() {
	defer s.wg.Done()
	t := time.NewTicker(s.opt.RefreshInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			s.db.Refresh(ctx) // on failure the current snapshot stays
			cancel()
		}
	}
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.counted(r.Method)
	if r.Method == http.MethodPost && r.URL.Path == "/-/refresh" {
		if err := s.db.Refresh(r.Context()); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintf(w, "version %d\n", s.db.Stats().Version)
		return
	}
	key, err := url.PathUnescape(r.URL.EscapedPath())
	if err != nil || len(key) == 0 || key[0] != '/' {
		http.Error(w, "bad key", http.StatusBadRequest)
		return
	}
	k := []byte(key[1:])
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		s.get(w, r, k)
	case http.MethodPut, http.MethodDelete:
		if !s.opt.Writable {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "read-only server (start it with -writable)", http.StatusMethodNotAllowed)
			return
		}
		s.write(w, r, k)
	default:
		w.Header().Set("Allow", "GET, HEAD, PUT, DELETE")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}

func (s *Server) get(w http.ResponseWriter, r *http.Request, key []byte) {
	for attempt := 0; ; attempt++ {
		snap, err := s.db.snap()
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		err = s.serve(w, r, snap, key)
		snap.Release()
		if err == nil {
			return
		}
		// Nothing was sent yet. A snapshot whose transaction was lost
		// (the namenode restarted, the connection broke) cannot read any
		// more: refresh once and try again; bad data is no reason to.
		if attempt == 0 && !errors.Is(err, ErrCorrupt) && s.recover(r.Context(), snap) == nil {
			continue
		}
		w.Header().Del("Content-Length")
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
}

// recover refreshes the database if failed is still its current
// snapshot (once, however many requests failed on it).
func (s *Server) recover(ctx context.Context, failed *Snapshot) error {
	s.recoverMu.Lock()
	defer s.recoverMu.Unlock()
	cur, err := s.db.snap()
	if err != nil {
		return err
	}
	same := cur == failed
	cur.Release()
	if !same {
		return nil
	}
	return s.db.Refresh(ctx)
}

// serve answers a GET or HEAD from snap. It returns an error only when
// nothing has been sent yet.
func (s *Server) serve(w http.ResponseWriter, r *http.Request, snap *Snapshot, key []byte) error {
	v, ok, err := snap.lookup(key)
	if err != nil {
		return err
	}
	h := w.Header()
	h.Set("X-KV-Version", strconv.FormatUint(snap.Version(), 10))
	if !ok {
		http.Error(w, "not found", http.StatusNotFound)
		return nil
	}
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Length", strconv.FormatInt(v.size(), 10))
	if r.Method == http.MethodHead {
		return nil
	}
	switch {
	case !v.ext:
		w.Write(v.inline)
	case v.n <= snap.cachedValueMax():
		// From the cached blocks, verified (see checkCached) before the
		// first byte is sent.
		parts, err := snap.slices(v.off, v.n)
		if err != nil {
			return err
		}
		if err := snap.checkCached(parts, v); err != nil {
			return err
		}
		for _, p := range parts {
			if _, err := w.Write(p); err != nil {
				return nil // the client went away
			}
		}
	default:
		// Streamed; an error after the headers can only cut the response
		// short, which the client sees against Content-Length.
		snap.acquire()
		val := &Value{s: snap, v: v}
		defer val.Close()
		if _, err := val.stream(w); err != nil {
			panic(http.ErrAbortHandler)
		}
	}
	return nil
}

// slices returns the bytes off..off+n as slices of cached blocks.
func (s *Snapshot) slices(off, n int64) ([][]byte, error) {
	if off < 0 || off+n > s.size {
		return nil, corruptf("record at %d+%d outside the file (%d bytes)", off, n, s.size)
	}
	var out [][]byte
	for n > 0 {
		b, err := s.block(uint64(off / s.bs))
		if err != nil {
			return nil, err
		}
		p := b[off%s.bs:]
		if int64(len(p)) > n {
			p = p[:n]
		}
		out = append(out, p)
		off += int64(len(p))
		n -= int64(len(p))
	}
	return out, nil
}

func (s *Server) write(w http.ResponseWriter, r *http.Request, key []byte) {
	req := &writeReq{key: key, del: r.Method == http.MethodDelete, done: make(chan error, 1)}
	if !req.del {
		if r.ContentLength >= 0 && r.ContentLength <= s.opt.MaxBufferedBody {
			b, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			req.value = b
		} else {
			req.stream = r.Body
		}
	}
	select {
	case s.writes <- req:
	case <-s.stop:
		http.Error(w, "server closing", http.StatusServiceUnavailable)
		return
	case <-r.Context().Done():
		return
	}
	// The batcher may be reading the body: wait for the answer whatever
	// the client does.
	err := <-req.done
	switch {
	case err == nil:
		w.Header().Set("X-KV-Version", strconv.FormatUint(s.db.Stats().Version, 10))
		w.WriteHeader(http.StatusNoContent)
	case errors.Is(err, ErrKeyTooLong):
		http.Error(w, err.Error(), http.StatusBadRequest)
	case errors.Is(err, ErrLocked):
		http.Error(w, err.Error(), http.StatusConflict)
	default:
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}

// batcher collects writes into batches: the first request opens a
// writer, requests arriving within BatchDelay join it (a streamed body is
// written in a batch of its own), then it commits and answers them all.
func (s *Server) batcher() {
	defer s.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var carry *writeReq
	for {
		first := carry
		carry = nil
		if first == nil {
			select {
			case first = <-s.writes:
			case <-s.stop:
				return
			}
		}
		carry = s.batch(ctx, first)
	}
}

// batch runs one batch starting with first; it returns a request that
// arrived for the next batch (a streamed one), if any.
func (s *Server) batch(ctx context.Context, first *writeReq) *writeReq {
	wr, err := s.db.Begin(ctx)
	if err != nil {
		first.done <- err
		return nil
	}
	var reqs []*writeReq
	var next *writeReq
	apply := func(q *writeReq) {
		var err error
		switch {
		case q.del:
			err = wr.Delete(q.key)
		case q.stream != nil:
			err = wr.PutReader(q.key, q.stream)
		default:
			err = wr.Put(q.key, q.value)
		}
		if err != nil && errors.Is(err, ErrKeyTooLong) {
			q.done <- err // refused alone; the batch goes on
			return
		}
		if err != nil {
			wr.fail(err)
		}
		reqs = append(reqs, q)
	}
	apply(first)
	if first.stream == nil {
		timer := time.NewTimer(s.opt.BatchDelay)
	collect:
		for len(reqs) < s.opt.MaxBatch {
			select {
			case q := <-s.writes:
				if q.stream != nil {
					next = q
					break collect
				}
				apply(q)
			case <-timer.C:
				break collect
			case <-s.stop:
				break collect
			}
		}
		timer.Stop()
	}
	err = wr.Commit(ctx)
	for _, q := range reqs {
		q.done <- err
	}
	return next
}

// URLPath returns the path under which a Server serves key: a slash and
// the key, percent-encoded.
func URLPath(key []byte) string { return "/" + url.PathEscape(string(key)) }

// counted reports a request to ServerOptions.OnRequest.
func (s *Server) counted(method string) {
	if s.opt.OnRequest != nil {
		s.opt.OnRequest(method)
	}
}
