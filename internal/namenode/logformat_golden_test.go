package namenode_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clientx"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/internal/commitlog"
	"github.com/plasmafs/plasma/internal/datanode"
	"github.com/plasmafs/plasma/internal/meta"
	"github.com/plasmafs/plasma/internal/namenode"
)

// goldenLogs are the golden data directories, one per commit-log format
// version: a checkpoint database that holds none of the log, and the log,
// written by the namenode of that version with every kind of change a
// commit makes (TestLogReplayGivesNamenodeState). Each must replay, forever, into
// the state its namenode had (expected-state.txt). Format 0 is the format
// from before the log had versions.
var goldenLogs = []string{"../meta/testdata/logformat0", "../meta/testdata/logformat1", "../meta/testdata/logformat2", "../meta/testdata/logformat3"}

// TestLogFormatGoldenReplays: each golden log replays into the checkpoint
// database it was written over, giving exactly the state the namenode
// that wrote it had.
func TestLogFormatGoldenReplays(t *testing.T) {
	for _, golden := range goldenLogs {
		t.Run(filepath.Base(golden), func(t *testing.T) {
			dir := copyGolden(t, golden)
			store, err := meta.OpenSQLite(filepath.Join(dir, "namenode.db"), false)
			if err != nil {
				t.Fatal(err)
			}
			defer store.Close()
			if err := namenode.ReplayLog(store, filepath.Join(dir, "namenode.db.log")); err != nil {
				t.Fatalf("replay the log: %v", err)
			}
			snap, err := store.Load(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(filepath.Join(golden, "expected-state.txt"))
			if err != nil {
				t.Fatal(err)
			}
			if got := dumpSnapshot(snap); got != string(want) {
				t.Errorf("replayed state differs from the golden one:\n got:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

// TestLogFormatGoldenNamenodeStarts: a namenode started on each golden
// data directory (log not yet replayed) serves every file of it.
func TestLogFormatGoldenNamenodeStarts(t *testing.T) {
	for _, golden := range goldenLogs {
		t.Run(filepath.Base(golden), func(t *testing.T) {
			dir := copyGolden(t, golden)
			store, err := meta.OpenSQLite(filepath.Join(dir, "namenode.db"), false)
			if err != nil {
				t.Fatal(err)
			}
			defer store.Close()
			quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
			nn, err := namenode.New(namenode.Config{Cluster: "golden", Blocksize: 64 << 10, Store: store, Logger: quiet,
				LogPath: filepath.Join(dir, "namenode.db.log")})
			if err != nil {
				t.Fatalf("namenode on the golden directory: %v", err)
			}
			defer nn.Close()
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			go nn.Serve(ln)
			cl, err := client.New(context.Background(), client.Config{Namenodes: []string{ln.Addr().String()}, Security: "none", DataSecurity: "none"})
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			want, err := os.ReadFile(filepath.Join(golden, "expected-tree.txt"))
			if err != nil {
				t.Fatal(err)
			}
			if got := clustertest.Tree(t, cl); got != string(want) {
				t.Errorf("namespace differs from the golden one:\n got:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

func copyGolden(t *testing.T, src string) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range []string{"namenode.db", "namenode.db.log"} {
		b, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// dumpSnapshot renders a store's state as text, in a stable order, with
// every durable field.
func dumpSnapshot(s *meta.Snapshot) string {
	var b strings.Builder
	inodes := append([]meta.Inode(nil), s.Inodes...)
	sort.Slice(inodes, func(i, j int) bool { return inodes[i].Ino < inodes[j].Ino })
	for _, a := range inodes {
		fmt.Fprintf(&b, "inode %d type=%d mode=%o user=%s group=%s size=%d nlink=%d mtime=%d ctime=%d rep=%d seq=%d target=%q\n",
			a.Ino, a.Type, a.Mode, a.User, a.Group, a.Size, a.Nlink, a.Mtime, a.Ctime, a.Rep, a.Seq, a.Target)
	}
	entries := append([]meta.Entry(nil), s.Entries...)
	sort.Slice(entries, func(i, j int) bool {
		if entries[i].Parent != entries[j].Parent {
			return entries[i].Parent < entries[j].Parent
		}
		return entries[i].Name < entries[j].Name
	})
	for _, e := range entries {
		fmt.Fprintf(&b, "entry %d/%s -> %d\n", e.Parent, e.Name, e.Ino)
	}
	inos := make([]uint64, 0, len(s.Blocks))
	for ino := range s.Blocks {
		inos = append(inos, ino)
	}
	sort.Slice(inos, func(i, j int) bool { return inos[i] < inos[j] })
	for _, ino := range inos {
		for _, x := range s.Blocks[ino] {
			fmt.Fprintf(&b, "extent %d index=%d count=%d gen=%d", ino, x.Index, x.Count, x.Gen)
			for _, r := range x.Replicas {
				fmt.Fprintf(&b, " replica=%d:%d", r.Node, r.Start)
			}
			fmt.Fprintf(&b, " crc=%x\n", x.CRC)
		}
	}
	for _, d := range s.Datanodes {
		fmt.Fprintf(&b, "datanode %d identity=%s blocks=%d enabled=%v\n", d.ID, d.Identity, d.Blocks, d.Enabled)
	}
	for _, id := range s.Draining {
		fmt.Fprintf(&b, "draining datanode %d\n", id)
	}
	for _, d := range s.Removed {
		fmt.Fprintf(&b, "removed datanode %d identity=%s\n", d.ID, d.Identity)
	}
	fmt.Fprintf(&b, "ino_limit %d\nlog_seq %d\n", s.InoLimit, s.LogSeq)
	return b.String()
}

// TestLogReplayGivesNamenodeState writes a golden data directory with the
// code of the day (writeGolden) and checks it: its log, replayed over its
// checkpoint, gives the state the namenode had. With PLASMA_WRITE_GOLDEN
// set it writes that directory (a new one) instead of a temporary one: so
// it is run once per log format version (meta.LogFormat), its output
// committed as ../meta/testdata/logformat<version> and added to goldenLogs.
func TestLogReplayGivesNamenodeState(t *testing.T) {
	out := os.Getenv("PLASMA_WRITE_GOLDEN")
	if out == "" {
		out = filepath.Join(t.TempDir(), "golden")
	}
	writeGolden(t, out)
	dir := copyGolden(t, out)
	store, err := meta.OpenSQLite(filepath.Join(dir, "namenode.db"), false)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if err := namenode.ReplayLog(store, filepath.Join(dir, "namenode.db.log")); err != nil {
		t.Fatalf("replay the log: %v", err)
	}
	snap, err := store.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join(out, "expected-state.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if got := dumpSnapshot(snap); got != string(want) {
		t.Errorf("replayed state differs from the namenode's:\n got:\n%s\nwant:\n%s", got, want)
	}
}

// writeGolden writes a golden data directory, out (a new directory): a
// checkpoint database of a new namespace, the commit log a namenode wrote
// over it while a client made every kind of change, and the namenode's
// state (expected-state.txt, from its store once it checkpointed the whole
// log) and namespace (expected-tree.txt).
func writeGolden(t *testing.T, out string) {
	if err := os.Mkdir(out, 0o755); err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	db := filepath.Join(work, "namenode.db")
	// The checkpoint: a new namespace, before the namenode ever ran.
	store, err := meta.OpenSQLiteWith(db, meta.SQLiteOptions{Format: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	copyFile(t, db, filepath.Join(out, "namenode.db"))
	store, err = meta.OpenSQLite(db, false)
	if err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(out, "namenode.db.log")
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	nn, err := namenode.New(namenode.Config{Cluster: "golden", Blocksize: 64 << 10, Store: store, Fresh: true, Logger: quiet,
		LogPath: logPath, LogSize: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go nn.Serve(ln)
	var dns []*datanode.Server
	for i := 1; i <= 3; i++ {
		vol := filepath.Join(work, fmt.Sprintf("dn%d", i))
		if _, err := datanode.InitWith(vol, "golden", 64<<10, 16<<20, datanode.PreallocFallocate); err != nil {
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
	// Journaled: the small extension below is logged with its bytes (log
	// format 3, journal.go).
	cl, err := client.New(context.Background(), client.Config{Namenodes: []string{ln.Addr().String()}, Security: "none", DataSecurity: "none", JournalSmallWrites: true})
	if err != nil {
		t.Fatal(err)
	}
	writeGoldenNamespace(t, cl)
	writeGoldenNodeService(t, cl)
	tree := clustertest.Tree(t, cl)
	cl.Close()
	for _, d := range dns {
		d.Close()
	}
	nn.Close() // the checkpointer applies the whole log to the store
	snap, err := store.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	store.Close()
	// The log without its preallocated zeros.
	l, err := commitlog.Open(logPath, 0, 1, func(uint64, []byte) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	used := l.Used()
	l.Close()
	if err := os.Truncate(logPath, used); err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{"expected-state.txt": dumpSnapshot(snap), "expected-tree.txt": tree} {
		if err := os.WriteFile(filepath.Join(out, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// writeGoldenNamespace makes every kind of change a commit can log.
func writeGoldenNamespace(t *testing.T, cl *client.Client) {
	ctx := context.Background()
	step := func(what string, fn func(tx *client.Txn) error) {
		t.Helper()
		if err := cl.Txn(ctx, func(ctx context.Context, tx *client.Txn) error { return fn(tx) }); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	write := func(tx *client.Txn, path string, data []byte, rep int) error {
		f, err := tx.CreateFile(ctx, path, client.CreateOptions{Mode: 0o640, Rep: rep})
		if err != nil {
			return err
		}
		if _, err := f.Write(data); err != nil {
			return err
		}
		return f.Close()
	}
	data := bytes.Repeat([]byte("plasma golden log "), 8000) // 144000 bytes: 3 blocks, the last partial
	step("mkdir", func(tx *client.Txn) error {
		if _, err := tx.Mkdir(ctx, "/d", 0o755); err != nil {
			return err
		}
		_, err := tx.MkdirAll(ctx, "/d/e/f", 0o700)
		return err
	})
	step("write blocks", func(tx *client.Txn) error { return write(tx, "/d/a", data, 2) })
	step("extension", func(tx *client.Txn) error {
		f, err := tx.Open(ctx, "/d/a")
		if err != nil {
			return err
		}
		if _, err := f.Seek(0, io.SeekEnd); err != nil {
			return err
		}
		if _, err := f.Write([]byte("appended in place")); err != nil {
			return err
		}
		return f.Close()
	})
	step("create and link", func(tx *client.Txn) error {
		if err := write(tx, "/d/b", []byte("small file"), 1); err != nil {
			return err
		}
		return tx.Link(ctx, "/d/b", "/d/e/b2")
	})
	step("rename", func(tx *client.Txn) error { return tx.Rename(ctx, "/d/b", "/d/c") })
	step("unlink a link", func(tx *client.Txn) error { return tx.Unlink(ctx, "/d/e/b2") })
	step("symlink and special files", func(tx *client.Txn) error {
		if _, err := tx.Symlink(ctx, "a", "/d/s"); err != nil {
			return err
		}
		d, err := tx.Lookup(ctx, "/d")
		if err != nil {
			return err
		}
		if _, err := clientx.At(tx).MknodAt(ctx, d.Ino, "p", client.TypeFIFO, 0o600, 0); err != nil {
			return err
		}
		_, err = clientx.At(tx).MknodAt(ctx, d.Ino, "null", client.TypeCharDevice, 0o666, 259)
		return err
	})
	step("setattr", func(tx *client.Txn) error {
		c, err := tx.Lookup(ctx, "/d/c")
		if err != nil {
			return err
		}
		mode, user, group := fs.FileMode(0o4755), "alice", "staff"
		mtime, rep := time.Unix(1700000000, 123456789), 2
		_, err = tx.SetAttr(ctx, c.Ino, client.SetAttr{Mode: &mode, User: &user, Group: &group, Mtime: &mtime, Rep: &rep})
		return err
	})
	step("truncate", func(tx *client.Txn) error {
		a, err := tx.Lookup(ctx, "/d/a")
		if err != nil {
			return err
		}
		return tx.Truncate(ctx, a.Ino, 70000)
	})
	step("unlink a file", func(tx *client.Txn) error {
		if err := write(tx, "/d/gone", data[:1000], 1); err != nil {
			return err
		}
		return nil
	})
	step("unlink a file", func(tx *client.Txn) error { return tx.Unlink(ctx, "/d/gone") })
	step("rmdir", func(tx *client.Txn) error { return tx.Rmdir(ctx, "/d/e/f") })
	step("move a directory", func(tx *client.Txn) error { return tx.Rename(ctx, "/d/e", "/e2") })
	step("many files", func(tx *client.Txn) error {
		for i := range 40 {
			if _, err := tx.Create(ctx, fmt.Sprintf("/e2/n%02d", i), client.CreateOptions{}); err != nil {
				return err
			}
		}
		return nil
	})
	if _, err := clientx.Auto(cl, clientx.Async).Mkdir(ctx, "/async", 0o755); err != nil {
		t.Fatalf("async commit: %v", err)
	}
	if err := cl.Sync(ctx); err != nil {
		t.Fatal(err)
	}
}

// writeGoldenNodeService logs the datanode records (log format 2): one
// datanode drained and enabled again, one drained (its replicas copied
// to the others) and removed, one left draining.
func writeGoldenNodeService(t *testing.T, cl *client.Client) {
	ctx := context.Background()
	nodes, err := cl.Datanodes(ctx)
	if err != nil || len(nodes) != 3 {
		t.Fatalf("datanodes: %v %v", nodes, err)
	}
	admin := func(op string, id uint32) {
		t.Helper()
		if _, err := cl.DatanodeAdmin(ctx, op, id); err != nil {
			t.Fatalf("datanode %s %d: %v", op, id, err)
		}
	}
	admin("drain", nodes[0].ID)
	admin("enable", nodes[0].ID)
	gone := nodes[2].ID
	admin("drain", gone)
	for deadline := time.Now().Add(60 * time.Second); ; {
		s, err := cl.ReplicationStatus(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if slices.ContainsFunc(s.Nodes, func(n client.DatanodeStatus) bool { return n.ID == gone && n.State == "drained" }) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("datanode %d not drained after 60s: %+v", gone, s)
		}
		time.Sleep(20 * time.Millisecond) // polling a condition
	}
	admin("remove", gone)
	admin("drain", nodes[1].ID)
}

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
