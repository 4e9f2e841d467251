package namenode_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/datanode"
	"github.com/plasmafs/plasma/internal/meta"
	"github.com/plasmafs/plasma/internal/namenode"
)

// gatedStore holds up every store write that records a datanode until the
// test opens the gate.
type gatedStore struct {
	*meta.SQLite
	entered chan struct{}
	gate    chan struct{}
	once    sync.Once
}

func (g *gatedStore) Apply(ctx context.Context, changes []*meta.Change) error {
	for _, c := range changes {
		if len(c.PutNodes) > 0 {
			g.once.Do(func() { close(g.entered) })
			<-g.gate
			break
		}
	}
	return g.SQLite.Apply(ctx, changes)
}

// TestRegistrationThroughCommitter: a new datanode's record is written by
// the committer, not by the request under the namenode lock. While that
// write waits, the namenode answers other requests, does not list the
// datanode and does not answer its registration; once the record is
// durable the datanode is registered and alive.
func TestRegistrationThroughCommitter(t *testing.T) {
	dir := t.TempDir()
	sq, err := meta.OpenSQLite(filepath.Join(dir, "nn.db"), false)
	if err != nil {
		t.Fatal(err)
	}
	defer sq.Close()
	store := &gatedStore{SQLite: sq, entered: make(chan struct{}), gate: make(chan struct{})}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	nn, err := namenode.New(namenode.Config{Cluster: "test", Blocksize: 64 << 10, Store: store, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer nn.Close()
	var gateOnce sync.Once
	openGate := func() { gateOnce.Do(func() { close(store.gate) }) }
	defer openGate() // before Close, also when the test fails
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go nn.Serve(ln)
	vol := filepath.Join(dir, "dn")
	if _, err := datanode.InitWith(vol, "test", 64<<10, 8<<20, datanode.PreallocFallocate); err != nil {
		t.Fatal(err)
	}
	dn, err := datanode.Open(datanode.Config{Dir: vol, Namenode: ln.Addr().String(), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer dn.Close()
	dln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer dln.Close()
	registered := make(chan error, 1)
	go func() { registered <- dn.Register(context.Background(), dln.Addr().String(), "") }()
	<-store.entered

	ctx := context.Background()
	cl, err := client.New(ctx, client.Config{Namenodes: []string{ln.Addr().String()}, Security: "none", DataSecurity: "none"})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	// Not a timing assertion: the bound only turns a namenode blocked on
	// the store write (the lock held during it) into a failure, not a hang.
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	s, err := cl.FsStat(sctx)
	cancel()
	if err != nil {
		t.Fatalf("namenode does not answer while a registration is being recorded: %v", err)
	}
	if s.Datanodes != 0 || s.LiveDatanodes != 0 {
		t.Errorf("datanode visible before its record is durable: %+v", s)
	}
	select {
	case err := <-registered:
		t.Fatalf("registration answered before its record was durable: %v", err)
	default:
	}
	openGate()
	if err := <-registered; err != nil {
		t.Fatal(err)
	}
	if s, err = cl.FsStat(ctx); err != nil || s.LiveDatanodes != 1 {
		t.Fatalf("after the record: %+v, %v", s, err)
	}
}
