package rpc_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/plasmafs/plasma/internal/auth"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/internal/rpc"
	"github.com/plasmafs/plasma/internal/wire"
	"go.uber.org/goleak"
)

// TestMain fails the package's tests if a goroutine is still running once
// they are done (a caller left waiting for a response that never comes).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestConcurrentCallsAndClose sends calls from many goroutines on one
// connection (each takes the reader role in turn), then closes it: later
// calls fail with ErrClosed and ErrNotSent, and nothing is left running.
func TestConcurrentCallsAndClose(t *testing.T) {
	c := clustertest.StartInProcess(t, clustertest.Options{Datanodes: 1})
	ctx := context.Background()
	conn, err := rpc.Dial(ctx, c.Addr, auth.None, nil)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				r, err := conn.Call(ctx, &wire.Request{Op: wire.OpPing})
				if err != nil || r.Code != wire.OK {
					t.Errorf("ping: %v %+v", err, r)
					return
				}
			}
		}()
	}
	wg.Wait()
	if got := conn.Requests(); got != 8*200 {
		t.Errorf("Requests() = %d, want %d", got, 8*200)
	}
	conn.Close()
	_, err = conn.Call(ctx, &wire.Request{Op: wire.OpPing})
	if !errors.Is(err, rpc.ErrClosed) || !errors.Is(err, rpc.ErrNotSent) {
		t.Fatalf("call on a closed connection: %v, want ErrClosed and ErrNotSent", err)
	}
	// A cancelled call does not leave anything behind either.
	conn2, err := rpc.Dial(ctx, c.Addr, auth.None, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn2.Close()
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := conn2.Call(cctx, &wire.Request{Op: wire.OpPing}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled call: %v", err)
	}
}
