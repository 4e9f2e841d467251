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

// journalTestCluster is a namenode with a commit log and two datanodes in
// this process, and a client that journals small appends.
type journalTestCluster struct {
	nn   *Namenode
	addr string // the namenode's
	dns  []*datanode.Server
	vols []string
	cl   *client.Client
}

// journalCluster starts a journalTestCluster whose namenode has the
// datanodes sync journaled writes settle after they became durable.
func journalCluster(t *testing.T, settle time.Duration) *journalTestCluster {
	t.Helper()
	dir := t.TempDir()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	store, err := meta.OpenSQLiteWith(filepath.Join(dir, "nn.db"), meta.SQLiteOptions{Format: true})
	if err != nil {
		t.Fatal(err)
	}
	nn, err := New(Config{Cluster: "j", Blocksize: 64 << 10, Store: store, Fresh: true, Logger: quiet,
		LogPath: filepath.Join(dir, "nn.db.log"), LogSize: 4 << 20, JournalSettle: settle})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go nn.Serve(ln)
	dns := make([]*datanode.Server, 2)
	t.Cleanup(func() {
		for _, d := range dns {
			if d != nil {
				d.Close()
			}
		}
		nn.Close()
		store.Close()
	})
	jc := &journalTestCluster{nn: nn, addr: ln.Addr().String(), dns: dns}
	for i := range dns {
		vol := filepath.Join(dir, fmt.Sprintf("dn%d", i))
		jc.vols = append(jc.vols, vol)
		if _, err := datanode.InitWith(vol, "j", 64<<10, 16<<20, datanode.PreallocFallocate); err != nil {
			t.Fatal(err)
		}
		dns[i] = startJournalDatanode(t, vol, ln.Addr().String())
	}
	cl, err := client.New(context.Background(), client.Config{Namenodes: []string{ln.Addr().String()}, Security: "none", DataSecurity: "none", JournalSmallWrites: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	jc.cl = cl
	return jc
}

// startJournalDatanode serves volume vol and registers it with the
// namenode at nn.
func startJournalDatanode(t *testing.T, vol, nn string) *datanode.Server {
	t.Helper()
	srv, err := datanode.Open(datanode.Config{Dir: vol, Namenode: nn, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
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
	return srv
}

// journalAppends creates files (replication 2) and appends to each from
// its own goroutine, every append a durable commit of its own.
func journalAppends(t *testing.T, cl *client.Client, files, appends int) {
	t.Helper()
	ctx := context.Background()
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
}

// TestJournaledWritesSettle: durable appends from concurrent clients are
// journaled (each pending once committed) and then forgotten once their
// datanodes synced in the background: the pending set drains. Fails
// without the settler (nothing is forgotten) and without journaling
// (nothing is ever pending).
func TestJournaledWritesSettle(t *testing.T) {
	jc := journalCluster(t, time.Millisecond)
	nn := jc.nn
	journalAppends(t, jc.cl, 4, 20)
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

// TestJournaledWritesHandedBackInPages: a datanode that registers again
// while journaled writes for it are pending gets every one of them back,
// in several pages when they exceed one (journalPage, small here), before
// it counts as registered. Fails when the datanode does not ask for the
// further pages.
func TestJournaledWritesHandedBackInPages(t *testing.T) {
	defer func(p int) { journalPage = p }(journalPage)
	journalPage = 64
	jc := journalCluster(t, 24*time.Hour)
	nn, dns := jc.nn, jc.dns
	journalAppends(t, jc.cl, 3, 10)
	dns[0].Close()
	dns[0] = startJournalDatanode(t, jc.vols[0], jc.addr)
	nn.mu.Lock()
	defer nn.mu.Unlock()
	var id uint32
	var c *conn
	for dn := range nn.nodes.all() {
		if dn.alive && dn.info.Addr != "" && dn.Identity == dns[0].Store().Config.Identity {
			id, c = dn.ID, dn.conn
		}
	}
	handed, pending := 0, 0
	for _, e := range nn.journal.entries {
		if got, ok := e.nodes[id]; ok {
			pending++
			if got == c {
				handed++
			}
		}
	}
	if pending < 10 || handed != pending {
		t.Fatalf("%d of %d journaled writes pending for the restarted datanode handed back to its new registration", handed, pending)
	}
}

// TestCoalesceJournal: appends to one block that follow one another merge
// into one write with the later checksum; a write further on, another
// block or another generation stay apart, in order.
func TestCoalesceJournal(t *testing.T) {
	w := func(ino, index, gen uint64, off int, data string, crc uint32) meta.JournalWrite {
		return meta.JournalWrite{Ino: ino, Index: index, Gen: gen, Offset: uint32(off), Data: []byte(data), CRC: crc}
	}
	got := coalesceJournal([]meta.JournalWrite{
		w(5, 0, 1, 10, "abc", 1), w(6, 0, 1, 0, "x", 2), w(5, 0, 1, 13, "de", 3),
		w(5, 0, 1, 20, "gap", 4), w(5, 0, 1, 23, "f", 5), w(5, 0, 2, 24, "new", 6),
	})
	want := []meta.JournalWrite{w(5, 0, 1, 10, "abcde", 3), w(6, 0, 1, 0, "x", 2), w(5, 0, 1, 20, "gapf", 5), w(5, 0, 2, 24, "new", 6)}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("coalesced\n%v\nwant\n%v", got, want)
	}
}
