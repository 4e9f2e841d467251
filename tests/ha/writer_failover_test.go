package ha

import (
	"bytes"
	"context"
	"fmt"
	"syscall"
	"testing"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/kv"
	"github.com/plasmafs/plasma/tests/testkit"
)

// Issue 22 item 3: writers that place data right after a failover, before
// any datanode has registered with the new leader, ride through it. The
// datanode is frozen (SIGSTOP) across the leader's kill -9, so the new
// leader knows it but cannot hear from it; a client-library writer
// (CopyIn, as 'plasma put'), then a Plasma KV writer, start at once and are
// refused for want of live datanodes (seen in the new leader's log); the
// datanode is resumed and registers, and both writes complete and read
// back byte-exact (the KV writer creates its database after the failover
// and commits batches in it). Without the client's wait for registrations
// (Config.AllocWait) both fail with ErrUnavailable.
func TestWritersRideThroughFailoverBeforeDatanodesRegister(t *testing.T) {
	g := startGroup(t, 3, 1)
	ctx := context.Background()
	dn := g.dns[0]

	// failover freezes the datanode, kills the leader, waits for its
	// successor to serve and returns it with the size its log had.
	failover := func() (*member, int) {
		t.Helper()
		dn.cmd.Process.Signal(syscall.SIGSTOP)
		old := g.leader()
		g.kill(old)
		var rest []*member
		for _, m := range g.members {
			if m != old {
				rest = append(rest, m)
			}
		}
		l := g.leaderAmong(rest...)
		return l, testkit.LogSize(l.log)
	}

	// A client-library writer.
	killed := g.leader()
	l, mark := failover()
	wc := g.client()
	defer wc.Close()
	data := testkit.RandomBytes(t, 2<<20+4321)
	done := make(chan error, 1)
	go func() {
		_, err := wc.CopyIn(ctx, bytes.NewReader(data), "/after-failover", client.CopyOptions{Rep: 1})
		done <- err
	}()
	testkit.WaitUnavailableRefusal(t, l.log, mark, done)
	dn.cmd.Process.Signal(syscall.SIGCONT)
	testkit.MustOK(t, "client writer across the failover", <-done)
	rc := g.client()
	defer rc.Close()
	if got := testkit.ReadFile(t, rc, "/after-failover"); !bytes.Equal(got, data) {
		t.Fatalf("/after-failover: read %d bytes, not the %d written", len(got), len(data))
	}

	// Plasma KV: the killed member rejoins (a majority must survive the
	// next kill), then the next failover, and a database is created and
	// takes its batches at once. (An existing database's next batch may
	// first extend its file's last block in place, which waits for the
	// frozen datanode itself rather than for the namenode.)
	g.startMember(killed, g.peers())
	g.waitLive(1)
	g.waitCaughtUp()
	value := func(b, i int) []byte { return bytes.Repeat([]byte(fmt.Sprintf("b%d k%d;", b, i)), 1+(b*13+i)%300) }
	l, mark = failover()
	kc := g.client()
	defer kc.Close()
	go func() {
		if err := kv.Create(ctx, kc, "/db", kv.CreateOptions{}); err != nil {
			done <- err
			return
		}
		db, err := kv.Open(ctx, kc, "/db", kv.Options{})
		if err != nil {
			done <- err
			return
		}
		defer db.Close()
		for b := range 2 {
			w, err := db.Begin(ctx)
			if err != nil {
				done <- err
				return
			}
			for i := range 200 {
				if err := w.Put([]byte(fmt.Sprintf("k%d-%03d", b, i)), value(b, i)); err != nil {
					w.Abort(ctx)
					done <- err
					return
				}
			}
			if err := w.Commit(ctx); err != nil {
				done <- fmt.Errorf("batch %d: %w", b, err)
				return
			}
		}
		done <- nil
	}()
	testkit.WaitUnavailableRefusal(t, l.log, mark, done)
	dn.cmd.Process.Signal(syscall.SIGCONT)
	testkit.MustOK(t, "KV database and batches across the failover", <-done)

	rdb, err := kv.Open(ctx, rc, "/db", kv.Options{})
	testkit.MustOK(t, "open the database to read", err)
	defer rdb.Close()
	for b := range 2 {
		for i := range 200 {
			v, err := rdb.Get([]byte(fmt.Sprintf("k%d-%03d", b, i)))
			if err != nil || !bytes.Equal(v, value(b, i)) {
				t.Fatalf("key k%d-%03d: %d bytes, %v", b, i, len(v), err)
			}
		}
	}
}
