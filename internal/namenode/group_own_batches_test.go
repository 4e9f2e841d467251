package namenode

import (
	"context"
	"net"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/plasmafs/plasma/internal/meta"
)

// A leader hands the batches it proposed to its store without decoding
// them again, and forgets each once applied: after many commits nothing
// is left held, and the store has every batch.
func TestGroupLeaderForgetsItsAppliedBatches(t *testing.T) {
	dir := t.TempDir()
	store, err := meta.OpenSQLite(filepath.Join(dir, "nn.db"), false)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	// Raft listens on the port after the client port: take a free one.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	g, err := OpenGroup(GroupConfig{Self: "1", Peers: []Peer{{ID: "1", Addr: "127.0.0.1:" + strconv.Itoa(port-1)}},
		Dir: filepath.Join(dir, "group"), Store: store, ElectionTimeout: 300 * time.Millisecond,
		Fatal: func(err error) { t.Errorf("store failed: %v", err) }})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	select {
	case lead := <-g.Leading():
		if !lead {
			t.Fatal("the only member did not become leader")
		}
	case <-time.After(time.Minute):
		t.Fatal("no leader after a minute")
	}
	if err := g.Ready(); err != nil {
		t.Fatal(err)
	}
	const n = 200
	for i := 1; i <= n; i++ {
		g.append([]*meta.Change{{InoLimit: uint64(1000 + i)}})
		if i%10 == 0 {
			if err := g.sync(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := g.WaitStore(); err != nil {
		t.Fatal(err)
	}
	g.pmu.Lock()
	held := len(g.own)
	g.pmu.Unlock()
	if held != 0 {
		t.Fatalf("%d applied batches still held by the leader", held)
	}
	snap, err := store.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if snap.InoLimit != 1000+n {
		t.Fatalf("store's inode limit %d, want %d", snap.InoLimit, 1000+n)
	}
}
