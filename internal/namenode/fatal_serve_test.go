package namenode_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"testing"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/meta"
	"github.com/plasmafs/plasma/internal/namenode"
)

// TestStoreFailureEndsServe: without a Fatal hook, a store failure stops
// the namenode and Serve returns it (ErrStoreFailed) to the program that
// runs it; the library never exits the process itself (this test process
// would end with it).
func TestStoreFailureEndsServe(t *testing.T) {
	ctx := context.Background()
	sq, err := meta.OpenSQLite(filepath.Join(t.TempDir(), "nn.db"), false)
	if err != nil {
		t.Fatal(err)
	}
	defer sq.Close()
	store := &brokenStore{SQLite: sq, only: "lost"}
	nn, err := namenode.New(namenode.Config{Cluster: "t", Store: store, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer nn.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- nn.Serve(ln) }()
	cl := dial(t, ln.Addr().String())
	defer cl.Close()
	store.broken.Store(true)
	err = cl.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
		_, err := tx.Mkdir(ctx, "/lost", 0)
		return err
	})
	if !errors.Is(err, client.ErrCommitUnknown) {
		t.Fatalf("commit while the store fails: %v, want ErrCommitUnknown", err)
	}
	if err := <-served; !errors.Is(err, namenode.ErrStoreFailed) {
		t.Fatalf("Serve returned %v, want ErrStoreFailed", err)
	}
	// A listener served after the failure is refused at once.
	ln2, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := nn.Serve(ln2); !errors.Is(err, namenode.ErrStoreFailed) {
		t.Fatalf("Serve after the failure returned %v, want ErrStoreFailed", err)
	}
}
