package core

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/auth"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/internal/rpc"
	"github.com/plasmafs/plasma/internal/wire"
)

// TestCallerDeadlineIsItsOwn: a caller's tiny deadline or cancellation
// ends its own wait with the context's error; the shared connection and
// the other transactions on it go on.
func TestCallerDeadlineIsItsOwn(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	cl := c.Client(client.Config{})
	defer cl.Close()
	ctx := context.Background()
	tx := cl.Begin()
	if _, err := tx.Mkdir(ctx, "/survivor", 0); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 50; i++ {
		short, cancel := context.WithTimeout(ctx, time.Microsecond)
		_, err := cl.Lookup(short, "/")
		cancel()
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("lookup with a 1µs deadline: %v, want nil or the context's error", err)
		}
		gone, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := cl.Lookup(gone, "/"); !errors.Is(err, context.Canceled) {
			t.Fatalf("lookup with a cancelled context: %v, want context.Canceled", err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatalf("the other transaction on the connection: %v", err)
	}
	if _, err := cl.Lookup(ctx, "/survivor"); err != nil {
		t.Fatal(err)
	}
}

// TestBadRequestAnswered: a request the namenode cannot decode, or with a
// path over the limit, gets an error answer; the connection and its open
// transaction survive.
func TestBadRequestAnswered(t *testing.T) {
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
	if r, err := conn.Call(ctx, &wire.Request{Op: wire.OpCreate, Txn: 3, Flags: wire.FlagBegin, Path: "/d", Type: wire.TypeDir}); err != nil || r.Code != wire.OK {
		t.Fatalf("create: %v %+v", err, r)
	}
	long := "/" + string(make([]byte, wire.MaxPath+1))
	r, err := conn.Call(ctx, &wire.Request{Op: wire.OpLookup, Txn: 3, Path: long})
	if err != nil || r.Code == wire.OK {
		t.Fatalf("over-long path: %v %+v, want an error answer", err, r)
	}
	if r, err := conn.Call(ctx, &wire.Request{Op: wire.Op(200), Txn: 3}); err != nil || r.Code == wire.OK {
		t.Fatalf("unknown operation: %v %+v, want an error answer", err, r)
	}
	if r, err := conn.Call(ctx, &wire.Request{Op: wire.OpCommit, Txn: 3}); err != nil || r.Code != wire.OK {
		t.Fatalf("commit after bad requests: %v %+v", err, r)
	}
}

// TestStalledReaderBlocksNobody: a client that sends commits and never
// reads the answers cannot freeze the committer: other clients' commits
// go on.
func TestStalledReaderBlocksNobody(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Security: "none", DataSecurity: "none"})
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) {
			syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		})
	}}
	raw, err := d.Dial("tcp", c.NN.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	nc, err := auth.Client(raw, auth.None, nil)
	if err != nil {
		t.Fatal(err)
	}
	stalled := make(chan error, 1)
	go func() {
		w := bufio.NewWriter(nc)
		var b []byte
		id := uint64(0)
		for txn := uint64(1); txn <= 40000; txn++ {
			for _, q := range []*wire.Request{
				{Op: wire.OpCreate, Txn: txn, Flags: wire.FlagBegin, Path: fmt.Sprintf("/stall-%d", txn), Type: wire.TypeDir},
				{Op: wire.OpCommit, Txn: txn},
			} {
				id++
				b = wire.FinishFrame(wire.AppendRequest(wire.BeginFrame(b), q), id)
				if _, err := w.Write(b); err != nil {
					stalled <- err
					return
				}
			}
		}
		stalled <- w.Flush()
	}()
	// Meanwhile (and whatever the stalled client managed), others commit.
	cl := c.Client(client.Config{})
	defer cl.Close()
	// Generous for 200 small commits, and shorter than the namenode's
	// write timeout, which must not be what frees the committer.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := 0; i < 200; i++ {
		err := cl.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
			_, err := tx.Mkdir(ctx, fmt.Sprintf("/other-%d", i), 0)
			return err
		})
		if err != nil {
			t.Fatalf("commit %d of a well-behaved client while another stalls: %v", i, err)
		}
	}
	raw.Close()
	<-stalled
}
