package namenode_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/meta"
	"github.com/plasmafs/plasma/internal/namenode"
)

// brokenStore is a real SQLite store whose writes start failing on demand,
// as a disk that fails an fsync would.
type brokenStore struct {
	*meta.SQLite
	broken atomic.Bool
	// only, if set, limits the failure to the writes that add this name
	// (the namenode's own background writes, such as inode reservations,
	// then succeed and cannot stop it before the test's commit).
	only string
}

func (s *brokenStore) Apply(ctx context.Context, changes []*meta.Change) error {
	if s.broken.Load() && (s.only == "" || addsName(changes, s.only)) {
		return errors.New("injected write failure")
	}
	return s.SQLite.Apply(ctx, changes)
}

func addsName(changes []*meta.Change, name string) bool {
	for _, c := range changes {
		for _, e := range c.PutEntries {
			if e.Name == name {
				return true
			}
		}
	}
	return false
}

func serve(t *testing.T, store meta.Store, fatal func(error)) (*namenode.Namenode, string) {
	t.Helper()
	nn, err := namenode.New(namenode.Config{Cluster: "t", Store: store, Fatal: fatal,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go nn.Serve(ln)
	return nn, ln.Addr().String()
}

func dial(t *testing.T, addr string) *client.Client {
	t.Helper()
	cl, err := client.New(context.Background(), client.Config{Namenodes: []string{addr}, Security: "none", DataSecurity: "none"})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// TestStoreErrorIsFatal: when the store fails, the namenode acknowledges
// nothing more (the client learns the outcome is unknown), stops serving,
// and a restart shows exactly what was durable.
func TestStoreErrorIsFatal(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "nn.db")
	sq, err := meta.OpenSQLite(path, false)
	if err != nil {
		t.Fatal(err)
	}
	store := &brokenStore{SQLite: sq}
	fatal := make(chan error, 1)
	nn, addr := serve(t, store, func(err error) { fatal <- err })
	cl := dial(t, addr)
	mkdir := func(cl *client.Client, p string) error {
		return cl.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
			_, err := tx.Mkdir(ctx, p, 0)
			return err
		})
	}
	if err := mkdir(cl, "/kept"); err != nil {
		t.Fatal(err)
	}
	store.broken.Store(true)
	err = mkdir(cl, "/lost")
	if !errors.Is(err, client.ErrCommitUnknown) {
		t.Fatalf("commit while the store fails: %v, want ErrCommitUnknown", err)
	}
	if ferr := <-fatal; ferr == nil {
		t.Fatal("fatal hook called without an error")
	}
	if _, err := cl.Lookup(ctx, "/kept"); err == nil {
		t.Fatal("namenode still serves after its store failed")
	}
	cl.Close()
	nn.Close()
	sq.Close()

	sq2, err := meta.OpenSQLite(path, false)
	if err != nil {
		t.Fatal(err)
	}
	defer sq2.Close()
	nn2, addr2 := serve(t, sq2, func(err error) { t.Errorf("fatal after restart: %v", err) })
	defer nn2.Close()
	cl2 := dial(t, addr2)
	defer cl2.Close()
	if _, err := cl2.Lookup(ctx, "/kept"); err != nil {
		t.Fatalf("/kept after restart: %v", err)
	}
	if _, err := cl2.Lookup(ctx, "/lost"); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("/lost after restart: %v, want not found", err)
	}
	// Inode numbers handed out before the failure are never reused.
	if err := mkdir(cl2, "/after"); err != nil {
		t.Fatal(err)
	}
}
