package txn

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/auth"
	"github.com/plasmafs/plasma/internal/clientx"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/internal/rpc"
	"github.com/plasmafs/plasma/internal/wire"
	"github.com/plasmafs/plasma/tests/testkit"
)

// pollUntil polls cond until it holds or the deadline passes.
func pollUntil(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func openTxns(t *testing.T, cl *client.Client) uint64 {
	t.Helper()
	st, err := cl.FsStat(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st.OpenTxns
}

// TestUnknownTxnRefused: a transaction exists from the request that begins
// it until it ends; a request naming any other id is refused and never
// begins one.
func TestUnknownTxnRefused(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	cred, err := auth.LoadCredential(c.AdminCred)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	conn, err := rpc.Dial(ctx, c.NN.Addr, auth.Privacy, cred)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	call := func(q *wire.Request) *wire.Response {
		t.Helper()
		r, err := conn.Call(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := call(&wire.Request{Op: wire.OpCreate, Txn: 5, Path: "/never", Type: wire.TypeFile}); r.Code != wire.ErrCodeTxn {
		t.Fatalf("create in a never-begun transaction: %+v, want ErrTxn", r)
	}
	if r := call(&wire.Request{Op: wire.OpCommit, Txn: 5}); r.Code != wire.ErrCodeTxn {
		t.Fatalf("commit of a never-begun transaction: %+v, want ErrTxn", r)
	}
	if r := call(&wire.Request{Op: wire.OpAbort, Txn: 6}); r.Code != wire.OK {
		t.Fatalf("abort of an unknown transaction: %+v", r)
	}
	if r := call(&wire.Request{Op: wire.OpCreate, Txn: 7, Path: "/one", Type: wire.TypeFile, Flags: wire.FlagBegin}); r.Code != wire.OK {
		t.Fatalf("create: %+v", r)
	}
	if r := call(&wire.Request{Op: wire.OpCommit, Txn: 7}); r.Code != wire.OK {
		t.Fatalf("commit: %+v", r)
	}
	// Ended by its commit: the id is unknown again.
	if r := call(&wire.Request{Op: wire.OpCreate, Txn: 7, Path: "/two", Type: wire.TypeFile}); r.Code != wire.ErrCodeTxn {
		t.Fatalf("create in a committed transaction: %+v, want ErrTxn", r)
	}
	if r := call(&wire.Request{Op: wire.OpFsStat}); r.Counters[8] != 0 {
		t.Fatalf("%d transactions open, want 0 (refused requests must not begin any)", r.Counters[8])
	}
	cl := c.Client(client.Config{})
	defer cl.Close()
	if _, err := cl.Lookup(ctx, "/never"); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("/never: %v", err)
	}
	if _, err := cl.Lookup(ctx, "/two"); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("/two: %v", err)
	}
}

// TestIdleTxnNotResumed: a transaction aborted as idle stays aborted; its
// later requests and its commit fail, and nothing of it is committed.
func TestIdleTxnNotResumed(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{NamenodeArgs: []string{"-txn-timeout", "1s"}})
	ctx := context.Background()
	cl := c.Client(client.Config{KeepaliveInterval: -1})
	defer cl.Close()
	watcher := c.Client(client.Config{})
	defer watcher.Close()
	tx := cl.Begin()
	if _, err := tx.Create(ctx, "/first-half", client.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, "the idle transaction to be aborted", 30*time.Second, func() bool { return openTxns(t, watcher) == 0 })
	if _, err := tx.Create(ctx, "/second-half", client.CreateOptions{}); !errors.Is(err, client.ErrTxn) {
		t.Fatalf("request after idle abort: %v, want ErrTxn", err)
	}
	if err := tx.Commit(ctx); !errors.Is(err, client.ErrTxn) {
		t.Fatalf("commit after idle abort: %v, want ErrTxn", err)
	}
	for _, p := range []string{"/first-half", "/second-half"} {
		if _, err := watcher.Lookup(ctx, p); !errors.Is(err, client.ErrNotFound) {
			t.Fatalf("%s exists after its transaction was aborted: %v", p, err)
		}
	}
}

// TestAbortWaitsForFlush: an abort while a file's background flush is
// running ends the transaction for good: the flush cannot bring it back
// and its locks are free at once.
func TestAbortWaitsForFlush(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	ctx := context.Background()
	cl := c.Client(client.Config{})
	defer cl.Close()
	bs := int(c.Opts.Blocksize)
	testkit.WriteFile(t, cl, "/f", testkit.RandomBytes(t, bs), 1)
	for round := 0; round < 20; round++ {
		tx := cl.Begin()
		f, err := tx.Open(ctx, "/f")
		if err != nil {
			t.Fatal(err)
		}
		clientx.SetFlushBlocks(f, 1)
		if _, err := f.Write(testkit.RandomBytes(t, 4*bs)); err != nil { // starts a background flush
			t.Fatal(err)
		}
		if err := tx.Abort(ctx); err != nil {
			t.Fatal(err)
		}
		if n := openTxns(t, cl); n != 0 {
			t.Fatalf("round %d: %d transactions open right after abort", round, n)
		}
		// The file's lock is free: another transaction writes it at once.
		err = cl.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
			_, err := tx.SetAttr(ctx, f.Ino(), client.SetAttr{Mtime: testkit.Ptr(time.Now())})
			return err
		})
		if err != nil {
			t.Fatalf("round %d: write after abort: %v", round, err)
		}
	}
}

// slowReader reads r at about rate bytes per tick.
func slowRead(r io.Reader, chunk int, tick time.Duration) ([]byte, error) {
	var out bytes.Buffer
	buf := make([]byte, chunk)
	for {
		n, err := io.ReadFull(r, buf)
		out.Write(buf[:n])
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return out.Bytes(), nil
		}
		if err != nil {
			return out.Bytes(), err
		}
		time.Sleep(tick) // a slow consumer, not synchronisation
	}
}

// TestLongReaderOutlivesTimeouts: a reader that takes longer than the
// transaction timeout and the ticket lifetime, and asks the namenode
// nothing while it streams, completes with the right bytes. Each limit is
// tried short alone (so neither the keepalive nor the ticket refresh can
// stand in for the other) and both together.
func TestLongReaderOutlivesTimeouts(t *testing.T) {
	for _, tc := range []struct{ name, timeout, lifetime string }{
		{"txn-timeout", "1s", "1h"},
		{"ticket-lifetime", "1h", "2s"},
		{"both", "1s", "2s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := clustertest.Start(t, clustertest.Options{NamenodeArgs: []string{"-txn-timeout", tc.timeout, "-ticket-lifetime", tc.lifetime}})
			cl := c.Client(client.Config{})
			defer cl.Close()
			bs := int(c.Opts.Blocksize)
			data := testkit.RandomBytes(t, 32*bs+123)
			testkit.WriteFile(t, cl, "/long", data, 2)

			cmd := exec.Command(c.Bin, "cat", "/long")
			// Over TCP, where tickets are checked (a local reader has the
			// datanode's file descriptor).
			cmd.Env = append(c.Env(), "PLASMAFS_NO_SHORTCIRCUIT=1")
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			got, rerr := slowRead(out, bs, 100*time.Millisecond)
			werr := cmd.Wait()
			if rerr != nil || werr != nil {
				t.Fatalf("slow cat: %v %v: %s", rerr, werr, stderr.String())
			}
			if took := time.Since(start); took < 2500*time.Millisecond {
				// Not a timing assertion on the system: the consumer sets
				// the pace, and the test is void if it was too fast.
				t.Fatalf("reader finished in %v; the test needs it to outlast ticket and timeout", took)
			}
			if !bytes.Equal(got, data) {
				t.Fatalf("slow cat read %d bytes, differing from the %d written", len(got), len(data))
			}
		})
	}
}

// TestOpenSeesOneVersion: while a writer keeps replacing a file with
// versions of different lengths, every reader sees exactly one committed
// version: its length and its bytes belong together.
func TestOpenSeesOneVersion(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	ctx := context.Background()
	bs := int(c.Opts.Blocksize)
	length := func(v byte) int { return (int(v)%5+1)*bs/2 + int(v) }
	version := func(v byte) []byte { return bytes.Repeat([]byte{v}, length(v)) }
	w := c.Client(client.Config{})
	defer w.Close()
	testkit.WriteFile(t, w, "/v", version(0), 1)
	var done atomic.Bool
	var reads, torn atomic.Int64
	var wg sync.WaitGroup
	var firstTorn atomic.Value
	for r := 0; r < 3; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl := c.Client(client.Config{})
			defer cl.Close()
			for !done.Load() {
				tx := cl.Begin()
				f, err := tx.Open(ctx, "/v")
				if err != nil {
					t.Error(err)
					return
				}
				got, err := io.ReadAll(f)
				tx.Abort(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				reads.Add(1)
				if len(got) == 0 || len(got) != length(got[0]) || !bytes.Equal(got, version(got[0])) {
					torn.Add(1)
					firstTorn.CompareAndSwap(nil, fmt.Sprintf("%d bytes starting with version %d", len(got), got[0]))
				}
			}
		}()
	}
	for v := 1; v <= 200; v++ {
		err := w.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
			f, err := tx.Open(ctx, "/v")
			if err != nil {
				return err
			}
			if err := f.Truncate(0); err != nil {
				return err
			}
			_, err = f.WriteAt(version(byte(v)), 0)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	done.Store(true)
	wg.Wait()
	if torn.Load() != 0 {
		t.Fatalf("%d of %d reads saw no committed version (first: %v)", torn.Load(), reads.Load(), firstTorn.Load())
	}
	t.Logf("%d reads during 200 commits, all of one version", reads.Load())
}

// TestCommitOutcomeUnknown: when the connection is lost after the commit
// was sent, Commit says the outcome is unknown rather than "failed".
func TestCommitOutcomeUnknown(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	ctx := context.Background()
	p := testkit.NewProxy(t, c.NN.Addr)
	cl := c.Client(client.Config{Namenodes: []string{p.Addr()}, KeepaliveInterval: -1})
	defer cl.Close()
	tx := cl.Begin()
	if _, err := tx.Create(ctx, "/maybe", client.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.Stop(c.NN)
	sent := p.Upstream()
	errc := make(chan error, 1)
	go func() { errc <- tx.Commit(ctx) }()
	pollUntil(t, "the commit to pass the proxy", 30*time.Second, func() bool { return p.Upstream() > sent })
	c.Kill(c.NN)
	err := <-errc
	if !errors.Is(err, client.ErrCommitUnknown) {
		t.Fatalf("commit with the namenode gone after the request: %v, want ErrCommitUnknown", err)
	}
	if errors.Is(err, client.ErrTxn) {
		t.Fatalf("unknown outcome also claims the transaction was not committed: %v", err)
	}
}
