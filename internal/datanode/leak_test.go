package datanode_test

import (
	"bytes"
	"context"
	"io"
	"testing"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clustertest"
	"go.uber.org/goleak"
)

// TestMain fails the package's tests if a goroutine the datanodes started
// (connection readers and executors, chain forwarding, heartbeats) is
// still running once they are done.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestServeAndClose runs every goroutine a datanode starts: registration
// and heartbeats, data connections, a replicated write (the chain
// forwards to the second datanode), reads, sync and verify; then the
// cluster stops and TestMain checks that none of them is left.
func TestServeAndClose(t *testing.T) {
	c := clustertest.StartInProcess(t, clustertest.Options{Datanodes: 2})
	cl := c.Client(t)
	ctx := context.Background()
	data := bytes.Repeat([]byte("plasma datanode "), 20000) // several blocks
	if _, err := cl.CopyIn(ctx, bytes.NewReader(data), "/f", client.CopyOptions{Rep: 2}); err != nil {
		t.Fatal(err)
	}
	err := cl.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
		f, err := tx.Open(ctx, "/f")
		if err != nil {
			return err
		}
		got, err := io.ReadAll(f)
		if err != nil {
			return err
		}
		if !bytes.Equal(got, data) {
			t.Errorf("read back %d bytes, differ from the %d written", len(got), len(data))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := cl.Fsck(ctx)
	if err != nil || len(rep.Problems) > 0 {
		t.Fatalf("fsck: %v %v", err, rep.Problems)
	}
}
