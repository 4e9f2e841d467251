package namenode

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/datanode"
	"github.com/plasmafs/plasma/internal/meta"
	"github.com/plasmafs/plasma/internal/wire"
)

// TestReaderReportVerified: a reader's report of a damaged replica is
// not taken on its word: a replica its datanode verifies good is left
// alone; once the block is damaged on disk, the same report condemns it.
func TestReaderReportVerified(t *testing.T) {
	const bs = 64 << 10
	dir := t.TempDir()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	store, err := meta.OpenSQLite(filepath.Join(dir, "nn.db"), false)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	n, err := New(Config{Cluster: "rr", Blocksize: bs, Store: store, Fresh: true, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go n.Serve(ln)
	vols := map[string]string{} // identity → volume directory
	for _, name := range []string{"dn1", "dn2"} {
		vol := filepath.Join(dir, name)
		cfg, err := datanode.InitWith(vol, "rr", bs, 4<<20, datanode.PreallocFallocate)
		if err != nil {
			t.Fatal(err)
		}
		vols[cfg.Identity] = vol
		srv, err := datanode.Open(datanode.Config{Dir: vol, Namenode: ln.Addr().String(), Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		defer srv.Close()
		dln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go srv.Serve(dln)
		if err := srv.Register(context.Background(), dln.Addr().String(), ""); err != nil {
			t.Fatal(err)
		}
	}
	cl, err := client.New(context.Background(), client.Config{Namenodes: []string{ln.Addr().String()}, Security: "none", DataSecurity: "none"})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := cl.CopyIn(context.Background(), bytes.NewReader(bytes.Repeat([]byte("reader report "), 10000)), "/f", client.CopyOptions{Rep: 2}); err != nil {
		t.Fatal(err)
	}

	n.mu.Lock()
	var ino uint64
	for i, in := range n.ns.inodes {
		if in.attr.Type == wire.TypeFile {
			ino = i
		}
	}
	x := n.ns.inodes[ino].blocks[0]
	r := x.Replicas[0]
	identity := n.nodes.get(r.Node).Identity
	n.mu.Unlock()
	report := func() {
		t.Helper()
		q := &wire.Request{Op: wire.OpReplicaDamaged, Ino: ino, Index: x.Index, Extents: []wire.Extent{{Index: x.Index, Count: 1, Replicas: []wire.Run{r}, CRC: x.CRC[:1]}}}
		n.mu.Lock()
		defer n.mu.Unlock()
		if _, err := n.opReplicaDamaged(nil, nil, nil, q); err != nil {
			t.Fatal(err)
		}
	}
	// awaitVerified polls until no report is being verified and returns
	// whether r is condemned.
	awaitVerified := func() bool {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); ; {
			n.mu.Lock()
			busy := len(n.repl.verifying)
			_, bad := n.repl.bad[r]
			n.mu.Unlock()
			if busy == 0 {
				return bad
			}
			if time.Now().After(deadline) {
				t.Fatal("report not verified after 30s")
			}
			time.Sleep(10 * time.Millisecond) // polling a condition
		}
	}

	report()
	if awaitVerified() {
		t.Fatal("a good replica was condemned on a reader's report")
	}
	f, err := os.OpenFile(filepath.Join(vols[identity], "data"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 1)
	off := int64(r.Start)*bs + 100
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x5a
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
	f.Close()
	report()
	if !awaitVerified() {
		// Condemned, then maybe replaced and forgotten already: then the
		// replica is no longer listed.
		n.mu.Lock()
		defer n.mu.Unlock()
		for _, y := range n.ns.inodes[ino].blocks {
			for _, z := range y.Replicas {
				if z.Node == r.Node && z.Start <= r.Start && r.Start < z.Start+uint64(y.Count) {
					t.Fatal("the damaged replica was not condemned after a reader's report")
				}
			}
		}
	}
}
