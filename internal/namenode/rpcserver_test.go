package namenode

import (
	"bufio"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/plasmafs/plasma/internal/auth"
	"github.com/plasmafs/plasma/internal/connlimit"
	"github.com/plasmafs/plasma/internal/wire"
)

// fakeHandler answers requests by op and records the other calls.
type fakeHandler struct {
	mu    sync.Mutex
	calls []string
	gone  chan *conn
}

func (h *fakeHandler) log(s string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls = append(h.calls, s)
}

func (h *fakeHandler) handleSafely(c *conn, q *wire.Request) (*wire.Response, error) {
	switch q.Op {
	case wire.OpCommit:
		return nil, &answersLater{func(id uint64) { h.commit(c, id, q.Txn, q.ReqID, 0, nil) }}
	case wire.OpSync:
		return nil, &answersLater{func(id uint64) { h.syncBarrier(c, id) }}
	case wire.OpBackup:
		return nil, &answersLater{func(id uint64) { h.serveAsync(c, id, q) }}
	}
	h.log("handle " + q.Op.String())
	if q.Op == wire.OpCreate {
		return nil, fail(wire.ErrCodeExists, "exists")
	}
	return &wire.Response{Counters: []uint64{q.Ino}}, nil
}

func (h *fakeHandler) commit(c *conn, id, txID, _ uint64, _ uint32, resp *wire.Response) {
	h.log("commit")
	if resp == nil {
		resp = &wire.Response{}
	}
	resp.Counters = append(resp.Counters, 1000+txID)
	c.sendAsync(id, resp) // as the committer does, from another goroutine
}

func (h *fakeHandler) syncBarrier(c *conn, id uint64) {
	h.log("sync")
	c.sendAsync(id, &wire.Response{Counters: []uint64{7}})
}

func (h *fakeHandler) serveAsync(c *conn, id uint64, q *wire.Request) {
	h.log("async " + q.Op.String())
	c.sendAsync(id, &wire.Response{})
}

func (h *fakeHandler) abortTxn(c *conn, txID uint64) { h.log("abort") }

func (h *fakeHandler) connGone(c *conn) { h.gone <- c }

func startRPC(t *testing.T) (*rpcServer, *fakeHandler, string) {
	h := &fakeHandler{gone: make(chan *conn, 1)}
	stop := make(chan struct{})
	srv := &rpcServer{h: h, security: auth.None, idleTimeout: time.Hour, stop: stop,
		log: slog.New(slog.NewTextHandler(io.Discard, nil)), conns: map[*conn]struct{}{},
		limits: connlimit.New(16, 16), frames: connlimit.NewBudget(wire.MaxFrame, time.Second)}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		srv.serve(ln)
		close(done)
	}()
	t.Cleanup(func() {
		close(stop)
		srv.closeAll()
		<-done
	})
	return srv, h, ln.Addr().String()
}

type rawClient struct {
	t  *testing.T
	nc net.Conn
	r  *bufio.Reader
}

func dialRPC(t *testing.T, addr string) *rawClient {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	// Security level none: the handshake is the client's hello.
	sc, err := auth.Client(nc, auth.None, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Not a timing assertion: a broken server fails instead of hanging.
	sc.SetDeadline(time.Now().Add(time.Minute))
	return &rawClient{t: t, nc: sc, r: bufio.NewReader(sc)}
}

func (rc *rawClient) call(id uint64, payload []byte) *wire.Response {
	rc.t.Helper()
	b := append(wire.BeginFrame(nil), payload...)
	if _, err := rc.nc.Write(wire.FinishFrame(b, id)); err != nil {
		rc.t.Fatal(err)
	}
	gotID, p, _, err := wire.ReadFrame(rc.r, nil)
	if err != nil {
		rc.t.Fatal(err)
	}
	if gotID != id {
		rc.t.Fatalf("answer to %d, want %d", gotID, id)
	}
	resp, err := wire.DecodeResponse(p)
	if err != nil {
		rc.t.Fatal(err)
	}
	return resp
}

func encodeReq(q *wire.Request) []byte { return wire.AppendRequest(nil, q) }

func TestRPCServerDispatch(t *testing.T) {
	srv, h, addr := startRPC(t)
	rc := dialRPC(t, addr)
	if r := rc.call(1, encodeReq(&wire.Request{Op: wire.OpStat, Ino: 5})); r.Code != 0 || len(r.Counters) != 1 || r.Counters[0] != 5 {
		t.Fatalf("getattr answer %+v", r)
	}
	// A frame that is no request: answered as invalid, the connection stays.
	if r := rc.call(2, []byte{0xff, 0xff, 0xff}); r.Code != wire.ErrCodeInvalid {
		t.Fatalf("bad request answered %+v", r)
	}
	if r := rc.call(3, encodeReq(&wire.Request{Op: wire.OpCommit, Txn: 4})); r.Code != 0 || r.Counters[0] != 1004 {
		t.Fatalf("commit answer %+v", r)
	}
	if r := rc.call(4, encodeReq(&wire.Request{Op: wire.OpSync})); r.Counters[0] != 7 {
		t.Fatalf("sync answer %+v", r)
	}
	if r := rc.call(5, encodeReq(&wire.Request{Op: wire.OpBackup})); r.Code != 0 {
		t.Fatalf("backup answer %+v", r)
	}
	// Compound requests: the change, then its commit with the change's
	// answer; a failed change aborts the transaction and is answered.
	if r := rc.call(6, encodeReq(&wire.Request{Op: wire.OpStat, Ino: 9, Txn: 2, Flags: wire.FlagCommit})); len(r.Counters) != 2 || r.Counters[0] != 9 || r.Counters[1] != 1002 {
		t.Fatalf("compound answer %+v", r)
	}
	if r := rc.call(7, encodeReq(&wire.Request{Op: wire.OpCreate, Txn: 3, Flags: wire.FlagCommit})); r.Code != wire.ErrCodeExists {
		t.Fatalf("failed compound answer %+v", r)
	}
	rc.nc.Close()
	<-h.gone
	want := []string{"handle stat", "commit", "sync", "async backup", "handle stat", "commit", "handle create", "abort"}
	h.mu.Lock()
	got := h.calls
	h.mu.Unlock()
	if len(got) != len(want) {
		t.Fatalf("calls %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("calls %q, want %q", got, want)
		}
	}
	if n := srv.requests.Load(); n != 6 {
		t.Errorf("%d requests counted, want 6 (the bad one not)", n)
	}
	srv.lnMu.Lock()
	defer srv.lnMu.Unlock()
	if len(srv.conns) != 0 {
		t.Errorf("%d connections still listed after close", len(srv.conns))
	}
}
