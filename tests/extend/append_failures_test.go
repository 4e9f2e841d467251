package extend

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// appFlushed begins a transaction on cl that appends data to path and
// flushes it (the extension reaches the datanodes) without committing.
func appFlushed(t *testing.T, ctx context.Context, cl *client.Client, path string, data []byte) (*client.Txn, *client.File) {
	t.Helper()
	tx := cl.Begin()
	f, err := tx.Open(ctx, path)
	testkit.MustOK(t, "open for the abandoned append", err)
	_, err = f.WriteAt(data, f.Size())
	testkit.MustOK(t, "abandoned append", err)
	testkit.MustOK(t, "flush the abandoned append", f.Flush(ctx))
	return tx, f
}

// appCheck compares path, read by each client, with want.
func appCheck(t *testing.T, what, path string, want []byte, cls ...*client.Client) {
	t.Helper()
	for i, cl := range cls {
		got, err := appRead(context.Background(), cl, path)
		if err != nil {
			t.Fatalf("%s: client %d: read %s: %v", what, i, path, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%s: client %d: %s reads wrongly: %s", what, i, path, appDiff(got, want))
		}
	}
}

// TestExtensionVanishedWriterNeverExposed: a writer extends the last block
// in place (the bytes reach both replicas) and then vanishes without
// committing: its client is closed, so the namenode aborts it. Another
// client, already retrying against the writer's lock, then appends; others
// grow the file by a truncate upwards and by a write further on, append
// zeros, and read with and without short-circuit. The vanished writer's
// bytes never show, and fsck stays clean. Done for a file of one partly
// filled block, one whose last block is the second, and one whose
// committed bytes end in zeros.
func TestExtensionVanishedWriterNeverExposed(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	ctx := context.Background()
	bs := int(c.Opts.Blocksize)
	cl := c.Client(client.Config{})
	defer cl.Close()
	tcp := c.Client(client.Config{NoShortCircuit: true})
	defer tcp.Close()
	evil := bytes.Repeat([]byte{0xA5}, 9000)
	for i, base := range [][]byte{
		testkit.SeededBytes(40000, 11),
		testkit.SeededBytes(bs+1000, 12),
		append(testkit.SeededBytes(20000, 13), make([]byte, 15000)...),
	} {
		path := fmt.Sprintf("/v%d", i)
		testkit.WriteRep2(t, cl, path, base)
		want := bytes.Clone(base)

		// 1. Vanish after the flush; an appender already waits.
		w1 := c.Client(client.Config{})
		appFlushed(t, ctx, w1, path, evil)
		attempts := make(chan struct{}, 1000)
		add := testkit.SeededBytes(100, uint64(20+i))
		done := make(chan error, 1)
		go func() {
			done <- appAppendCounting(ctx, tcp, path, add, attempts)
		}()
		<-attempts
		<-attempts // the appender met the writer's lock at least once
		w1.Close()
		testkit.MustOK(t, "append after the writer vanished", <-done)
		want = append(want, add...)
		appCheck(t, "after a vanished writer and an append", path, want, cl, tcp)

		// 2. Vanish again with more bytes; then a truncate upwards.
		w2 := c.Client(client.Config{})
		appFlushed(t, ctx, w2, path, evil)
		w2.Close()
		fi, err := cl.Lookup(ctx, path)
		testkit.MustOK(t, "lookup", err)
		up := int64(len(want) + 5000)
		testkit.MustOK(t, "truncate up", cl.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
			return tx.Truncate(ctx, fi.Ino, up)
		}))
		want = append(want, make([]byte, 5000)...)
		appCheck(t, "after a vanished writer and a truncate upwards", path, want, cl, tcp)

		// 3. Vanish again; then a write two blocks further on.
		w3 := c.Client(client.Config{})
		appFlushed(t, ctx, w3, path, evil)
		w3.Close()
		far := int64(len(want) + 2*bs)
		testkit.MustOK(t, "write further on", cl.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
			f, err := tx.Open(ctx, path)
			if err != nil {
				return err
			}
			_, err = f.WriteAt([]byte("far"), far)
			return err
		}))
		want = append(append(want, make([]byte, far-int64(len(want)))...), "far"...)
		appCheck(t, "after a vanished writer and a write further on", path, want, cl, tcp)

		// 4. Vanish again; then an append of zeros only (nothing to send)
		// and an append after it.
		w4 := c.Client(client.Config{})
		appFlushed(t, ctx, w4, path, evil)
		w4.Close()
		testkit.MustOK(t, "append zeros", appAppend(ctx, cl, path, make([]byte, 3000)))
		want = append(want, make([]byte, 3000)...)
		appCheck(t, "after a vanished writer and an append of zeros", path, want, cl, tcp)
		testkit.MustOK(t, "append", appAppend(ctx, tcp, path, []byte("tail")))
		want = append(want, "tail"...)
		appCheck(t, "after an append of zeros and an append", path, want, cl, tcp)

		// 5. A writer that extends and then, in the same transaction, grows
		// the file past the block and commits.
		testkit.MustOK(t, "append and grow", cl.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
			f, err := tx.Open(ctx, path)
			if err != nil {
				return err
			}
			if _, err := f.WriteAt([]byte("xyz"), f.Size()); err != nil {
				return err
			}
			if err := f.Flush(ctx); err != nil {
				return err
			}
			return f.Truncate(f.Size() + int64(bs))
		}))
		want = append(append(want, "xyz"...), make([]byte, bs)...)
		appCheck(t, "after an append and a truncate upwards in one transaction", path, want, cl, tcp)
	}
	if p := fsckProblems(t, cl); len(p) > 0 {
		t.Fatalf("fsck: %q", p)
	}
}

// appAppendCounting is appAppend that signals every attempt on attempts.
func appAppendCounting(ctx context.Context, cl *client.Client, path string, rec []byte, attempts chan<- struct{}) error {
	for {
		err := cl.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
			select {
			case attempts <- struct{}{}:
			default:
			}
			f, err := tx.Open(ctx, path)
			if err != nil {
				return err
			}
			if _, err := f.WriteAt(rec, f.Size()); err != nil {
				return err
			}
			return f.Flush(ctx)
		})
		if !errors.Is(err, client.ErrConflict) {
			return err
		}
	}
}

// TestExtensionDatanodeKilledDuringAppends: a client appends to a rep-2 file
// (three datanodes), committing each append; after ten appends one
// datanode holding the last block is killed with SIGKILL while the next
// appends run. Appends go on (the extension falls back to copy on write,
// or the dead replica is dropped at commit); every acknowledged append
// reads back, with and without short-circuit, before and after the
// datanode comes back; fsck reports nothing but missing replicas.
func TestExtensionDatanodeKilledDuringAppends(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Datanodes: 3})
	ctx := context.Background()
	cl := c.Client(client.Config{})
	defer cl.Close()
	tcp := c.Client(client.Config{NoShortCircuit: true})
	defer tcp.Close()
	const path = "/dn"
	base := testkit.SeededBytes(30000, 1)
	testkit.WriteRep2(t, cl, path, base)

	var mu sync.Mutex
	want := bytes.Clone(base)
	var failed []string
	tenth := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 60; i++ {
			add := testkit.SeededBytes(1+i*37%900, uint64(100+i))
			err := appAppend(ctx, cl, path, add)
			mu.Lock()
			if err == nil {
				want = append(want, add...)
			} else {
				failed = append(failed, fmt.Sprintf("append %d: %v", i, err))
			}
			mu.Unlock()
			if i == 9 {
				close(tenth)
			}
		}
	}()
	<-tenth
	// The datanode holding the first replica of the last block.
	last := uint64(0)
	for idx := range blocksOf(t, tcp, path) {
		last = max(last, idx)
	}
	var victim *clustertest.Proc
	for _, ex := range appExtents(t, tcp, path) {
		if ex.Index <= last && last < ex.Index+uint64(ex.Count) {
			for _, p := range c.DNs {
				if p.Addr == ex.Replicas[0].Addr {
					victim = p
				}
			}
		}
	}
	if victim == nil {
		t.Fatal("no datanode found for the last block")
	}
	c.Kill(victim)
	mu.Lock()
	atKill := len(want)
	mu.Unlock()
	<-done
	mu.Lock()
	t.Logf("killed datanode %s at %d bytes; %d bytes appended after; %d appends failed: %q", victim.Addr, atKill, len(want)-atKill, len(failed), failed)
	final := bytes.Clone(want)
	mu.Unlock()
	if len(failed) > 0 {
		// A failed append is not acknowledged; but it must have said so
		// cleanly, and nothing of it may show (checked below).
		for _, f := range failed {
			if strings.Contains(f, "panic") || strings.Contains(f, "goroutine") {
				t.Errorf("an append failed with a stack trace: %s", f)
			}
		}
	}
	appCheck(t, "after the datanode was killed", path, final, cl, tcp)

	c.StartDatanode(victim)
	c.WaitLive(3)
	for i := 0; i < 10; i++ {
		add := testkit.SeededBytes(1+i*53%700, uint64(300+i))
		testkit.MustOK(t, "append after the datanode came back", appAppend(ctx, tcp, path, add))
		final = append(final, add...)
	}
	appCheck(t, "after the datanode came back", path, final, cl, tcp)
	rep, err := cl.Fsck(ctx)
	testkit.MustOK(t, "fsck", err)
	t.Logf("fsck: %q", rep.Problems)
	if p := fsckProblems(t, cl, "replicas"); len(p) > 0 {
		t.Fatalf("fsck: %q", p)
	}
}

// appExtents returns the block list of path.
func appExtents(t *testing.T, cl *client.Client, path string) []client.Extent {
	t.Helper()
	var xs []client.Extent
	testkit.MustOK(t, "blocks", cl.Txn(context.Background(), func(ctx context.Context, tx *client.Txn) error {
		fi, err := tx.Lookup(ctx, path)
		if err != nil {
			return err
		}
		xs, err = tx.Blocks(ctx, fi.Ino)
		return err
	}))
	return xs
}

// TestExtensionNamenodeRestartBeforeCommit: a writer's extension reaches the
// datanodes, then the namenode is killed and restarted before the commit.
// The commit must fail, nothing of the extension may show, and appends by
// the same client (reconnected) and by a new one must extend the file
// correctly; a reader that opened the file before reads its version; fsck
// (library and CLI) is clean.
func TestExtensionNamenodeRestartBeforeCommit(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	ctx := context.Background()
	cl := c.Client(client.Config{})
	defer cl.Close()
	const path = "/nn"
	base := testkit.SeededBytes(45000, 1)
	testkit.WriteRep2(t, cl, path, base)
	want := bytes.Clone(base)
	for i := 0; i < 3; i++ {
		add := testkit.SeededBytes(700, uint64(10+i))
		testkit.MustOK(t, "append", appAppend(ctx, cl, path, add))
		want = append(want, add...)
	}
	before := blocksOf(t, cl, path)

	tx, f := appFlushed(t, ctx, cl, path, bytes.Repeat([]byte{0xA5}, 12000))
	c.Kill(c.NN)
	c.StartNamenode()
	c.WaitLive(2)
	if err := tx.Commit(ctx); err == nil {
		t.Fatal("a commit of a transaction begun before the namenode restarted succeeded")
	} else {
		t.Logf("commit after the restart: %v", err)
	}
	_ = f
	tcp := c.Client(client.Config{NoShortCircuit: true})
	defer tcp.Close()
	appCheck(t, "after the restart", path, want, tcp)
	// The same client, reconnecting (its first attempt may meet the old
	// connection's end).
	var err error
	add := testkit.SeededBytes(300, 50)
	for attempt := 0; attempt < 3; attempt++ {
		if err = appAppend(ctx, cl, path, add); err == nil {
			break
		}
	}
	testkit.MustOK(t, "append by the same client after the restart", err)
	want = append(want, add...)
	add = testkit.SeededBytes(20000, 51)
	testkit.MustOK(t, "append by a new client", appAppend(ctx, tcp, path, add))
	want = append(want, add...)
	appCheck(t, "after appends following the restart", path, want, cl, tcp)
	if after := blocksOf(t, cl, path); after[0] != before[0] {
		t.Logf("block 0 moved %s → %s (copied, not extended)", before[0], after[0])
	}
	if p := fsckProblems(t, cl); len(p) > 0 {
		t.Fatalf("fsck: %q", p)
	}
	c.MustRun("fsck")
}

// TestExtensionDatanodeDiesBetweenExtensionAndCommit: the extension of a
// rep-2 file's last block reaches both replicas, then the datanode of one
// of them (the first of the chain, or the second) is killed with SIGKILL
// before the commit; in a third round it is killed before the flush, so
// the extension itself fails. Each commit must either succeed with every
// byte readable or fail saying so with nothing of it visible; after the
// datanodes come back, appends go on, every acknowledged byte reads back
// through both paths, and fsck reports nothing worse than missing
// replicas.
func TestExtensionDatanodeDiesBetweenExtensionAndCommit(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Datanodes: 4})
	ctx := context.Background()
	cl := c.Client(client.Config{})
	defer cl.Close()
	tcp := c.Client(client.Config{NoShortCircuit: true})
	defer tcp.Close()
	dnOf := func(addr string) *clustertest.Proc {
		for _, p := range c.DNs {
			if p.Addr == addr {
				return p
			}
		}
		t.Fatalf("no datanode at %s", addr)
		return nil
	}
	for round, mode := range []string{"second replica after the flush", "first replica after the flush", "first replica before the flush"} {
		path := fmt.Sprintf("/d%d", round)
		base := testkit.SeededBytes(30000+round*1000, uint64(round))
		testkit.WriteRep2(t, cl, path, base)
		want := bytes.Clone(base)
		xs := appExtents(t, tcp, path)
		if len(xs) != 1 || len(xs[0].Replicas) != 2 {
			t.Fatalf("%s: block list %+v", path, xs)
		}
		which := 1
		if round > 0 {
			which = 0
		}
		victim := dnOf(xs[0].Replicas[which].Addr)
		// A reader of the first version, opened before.
		old := &oldReader{data: bytes.Clone(base)}
		old.tx = tcp.Begin()
		var err error
		old.f, err = old.tx.Open(ctx, path)
		testkit.MustOK(t, "open an old reader", err)

		add := testkit.SeededBytes(5000, uint64(40+round))
		tx := cl.Begin()
		f, err := tx.Open(ctx, path)
		testkit.MustOK(t, "open", err)
		_, err = f.WriteAt(add, f.Size())
		testkit.MustOK(t, "append", err)
		if mode == "first replica before the flush" {
			c.Kill(victim)
		}
		ferr := f.Flush(ctx)
		if mode != "first replica before the flush" {
			testkit.MustOK(t, mode+": flush", ferr)
			c.Kill(victim)
		}

		cerr := ferr
		if cerr == nil {
			cerr = tx.Commit(ctx)
		} else {
			tx.Abort(ctx)
		}
		t.Logf("%s: flush %v, commit %v", mode, ferr, cerr)
		if cerr == nil {
			want = append(want, add...)
		}
		appCheck(t, mode+": after the commit", path, want, cl, tcp)
		if err := old.reread(round); err != nil {
			t.Errorf("%s: reader of the first version: %v", mode, err)
		}
		old.tx.Abort(ctx)
		// More appends with the datanode still down.
		for i := 0; i < 3; i++ {
			add := testkit.SeededBytes(777, uint64(60+10*round+i))
			testkit.MustOK(t, mode+": append with the datanode down", appAppend(ctx, cl, path, add))
			want = append(want, add...)
		}
		appCheck(t, mode+": after appends with the datanode down", path, want, cl, tcp)
		c.StartDatanode(victim)
		c.WaitLive(4)
		for i := 0; i < 3; i++ {
			add := testkit.SeededBytes(555, uint64(90+10*round+i))
			testkit.MustOK(t, mode+": append after the datanode came back", appAppend(ctx, tcp, path, add))
			want = append(want, add...)
		}
		appCheck(t, mode+": after the datanode came back", path, want, cl, tcp)
	}
	rep, err := cl.Fsck(ctx)
	testkit.MustOK(t, "fsck", err)
	t.Logf("fsck: %q", rep.Problems)
	if p := fsckProblems(t, cl, "replicas"); len(p) > 0 {
		t.Fatalf("fsck: %q", p)
	}
}
