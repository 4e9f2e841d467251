package namenode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/datanode"
	"github.com/plasmafs/plasma/internal/meta"
)

// journalCluster starts a namenode with a commit log and two datanodes in
// this process, and a client that journals small appends.
func journalCluster(t *testing.T) (*Namenode, *client.Client) {
	t.Helper()
	dir := t.TempDir()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	store, err := meta.OpenSQLiteWith(filepath.Join(dir, "nn.db"), meta.SQLiteOptions{Format: true})
	if err != nil {
		t.Fatal(err)
	}
	nn, err := New(Config{Cluster: "j", Blocksize: 64 << 10, Store: store, Fresh: true, Logger: quiet,
		LogPath: filepath.Join(dir, "nn.db.log"), LogSize: 4 << 20, JournalSettle: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go nn.Serve(ln)
	var dns []*datanode.Server
	t.Cleanup(func() {
		for _, d := range dns {
			d.Close()
		}
		nn.Close()
		store.Close()
	})
	for i := 1; i <= 2; i++ {
		vol := filepath.Join(dir, fmt.Sprintf("dn%d", i))
		if _, err := datanode.InitWith(vol, "j", 64<<10, 16<<20, datanode.PreallocFallocate); err != nil {
			t.Fatal(err)
		}
		srv, err := datanode.Open(datanode.Config{Dir: vol, Namenode: ln.Addr().String(), Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		dln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go srv.Serve(dln)
		if err := srv.Register(context.Background(), dln.Addr().String(), ""); err != nil {
			t.Fatal(err)
		}
		dns = append(dns, srv)
	}
	cl, err := client.New(context.Background(), client.Config{Namenodes: []string{ln.Addr().String()}, Security: "none", DataSecurity: "none", JournalSmallWrites: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return nn, cl
}

// TestJournaledWritesSettle: durable appends from concurrent clients are
// journaled (each pending once committed) and then forgotten once their
// datanodes synced in the background: the pending set drains. Fails
// without the settler (nothing is forgotten) and without journaling
// (nothing is ever pending).
func TestJournaledWritesSettle(t *testing.T) {
	nn, cl := journalCluster(t)
	ctx := context.Background()
	const files, appends = 4, 20
	for i := 0; i < files; i++ {
		if err := cl.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
			f, err := tx.CreateFile(ctx, fmt.Sprintf("/f%d", i), client.CreateOptions{Rep: 2})
			if err != nil {
				return err
			}
			_, err = f.Write([]byte("first bytes"))
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	errs := make(chan error, files)
	for i := 0; i < files; i++ {
		go func() {
			for k := 0; k < appends; k++ {
				err := cl.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
					f, err := tx.Open(ctx, fmt.Sprintf("/f%d", i))
					if err != nil {
						return err
					}
					_, err = f.WriteAt([]byte(fmt.Sprintf("record %d\n", k)), f.Size())
					return err
				})
				if err != nil && !errors.Is(err, client.ErrConflict) {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for i := 0; i < files; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	journaled := func() (int, uint64) {
		nn.mu.Lock()
		defer nn.mu.Unlock()
		return len(nn.journal.entries), nn.durableSeq
	}
	deadline := time.Now().Add(time.Minute)
	for {
		n, _ := journaled()
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d journaled writes still pending a minute after the last commit: their datanodes never synced", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if nn.journal.kick == nil {
		t.Fatal("no commit was journaled")
	}
}
