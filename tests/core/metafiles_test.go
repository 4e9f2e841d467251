package core

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// startupOutcome runs a namenode listening on addr and reports whether it
// exited (and with what output) or came up and served (it is then
// killed).
func startupOutcome(t *testing.T, addr string, args ...string) (out string, code int, running bool) {
	t.Helper()
	cmd := exec.Command(clustertest.Binary(t), append([]string{"namenode", "-listen", addr}, args...)...)
	var b bytes.Buffer
	cmd.Stdout, cmd.Stderr = &b, &b
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-done:
			return b.String(), cmd.ProcessState.ExitCode(), false
		case <-time.After(10 * time.Millisecond):
		}
		if conn, err := net.Dial("tcp", addr); err == nil {
			conn.Close()
			break
		}
	}
	cmd.Process.Kill()
	<-done
	return b.String(), -1, true
}

// TestNamenodeNeedsFormat: a namenode whose database does not exist
// refuses to start (and creates nothing) unless told to format a new
// namespace; so does one whose database was not closed cleanly and whose
// write-ahead log is gone (the most recent commits are in it), unless
// told to accept the loss.
func TestNamenodeNeedsFormat(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "nn.db")
	out, code, running := startupOutcome(t, clustertest.FreeAddr(t), "-security", "none", "-db", db)
	if running || code == 0 {
		t.Fatalf("namenode without a database started (exit %d, running %v):\n%s", code, running, out)
	}
	if !strings.Contains(out, db+" does not exist") || !strings.Contains(out, "-format") {
		t.Errorf("refusal does not say what is missing and what to do:\n%s", out)
	}
	if _, err := os.Stat(db); err == nil {
		t.Errorf("the refused start created %s", db)
	}

	// A cluster whose namenode dies (SIGKILL) with commits in the WAL,
	// and whose WAL is then lost.
	c := clustertest.Start(t, clustertest.Options{Datanodes: 1})
	cl := c.Client(client.Config{})
	defer cl.Close()
	testkit.WriteFile(t, cl, "/recent", []byte("in the WAL"), 1)
	c.Kill(c.NN)
	nndb := filepath.Join(c.Dir, "namenode.db")
	if err := os.Remove(nndb + "-wal"); err != nil {
		t.Fatal(err)
	}
	args := []string{"-security", "none", "-db", nndb, "-cluster", c.Opts.Cluster, "-blocksize", fmt.Sprint(c.Opts.Blocksize)}
	out, code, running = startupOutcome(t, clustertest.FreeAddr(t), args...)
	if running || code == 0 {
		t.Fatalf("namenode whose WAL is gone started (exit %d, running %v):\n%s", code, running, out)
	}
	if !strings.Contains(out, nndb+"-wal") || !strings.Contains(out, "-accept-lost-wal") {
		t.Errorf("refusal does not name the missing WAL and the way out:\n%s", out)
	}
	if _, _, running = startupOutcome(t, clustertest.FreeAddr(t), append(args, "-accept-lost-wal")...); !running {
		t.Error("namenode with -accept-lost-wal did not start")
	}
}

func volumeNamespace(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "config"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct{ Namespace string }
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	return cfg.Namespace
}

// TestReplacedDatabaseVolumesRefuse: the namenode's metadata files are
// deleted and a new namespace is formatted. The old datanode volumes,
// which recorded their namespace when they first joined, refuse to join
// the new one (naming the volume, both namespace ids and the remedy), and
// the namenode neither lists them nor hands out their blocks. A new volume
// joins the new namespace.
func TestReplacedDatabaseVolumesRefuse(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Datanodes: 2})
	cl := c.Client(client.Config{})
	testkit.WriteFile(t, cl, "/old", testkit.RandomBytes(t, 5*int(c.Opts.Blocksize)), 2)
	cl.Close()
	oldNS := volumeNamespace(t, c.DNs[0].Dir)
	if oldNS == "" || volumeNamespace(t, c.DNs[1].Dir) != oldNS {
		t.Fatalf("volumes did not record the namespace they joined: %q, %q", oldNS, volumeNamespace(t, c.DNs[1].Dir))
	}
	for _, p := range append(c.DNs, c.NN) {
		c.Kill(p)
	}
	db := filepath.Join(c.Dir, "namenode.db")
	for _, suffix := range []string{"", "-wal", "-shm", ".log"} {
		os.Remove(db + suffix)
	}
	c.Opts.NamenodeArgs = []string{"-format"}
	c.StartNamenode()
	c.Opts.NamenodeArgs = nil
	ms := regexp.MustCompile(`formatted a new namespace ([0-9a-f]+)`).FindAllStringSubmatch(c.ReadLog(c.NN), -1)
	if len(ms) != 2 || ms[0][1] != oldNS || ms[1][1] == oldNS {
		t.Fatalf("namenode log does not show the old and a new namespace:\n%s", c.ReadLog(c.NN))
	}
	newNS := ms[1][1]
	cl = c.Client(client.Config{})
	defer cl.Close()
	ctx := context.Background()
	for _, p := range c.DNs {
		c.StartDatanode(p)
		// It exits, or it joins (then the namenode lists it).
		for p.Running() {
			if nodes, err := cl.Datanodes(ctx); err == nil && len(nodes) > 0 {
				c.Kill(p)
				t.Fatalf("datanode %s joined a new namespace: %+v", p.Dir, nodes)
			}
			time.Sleep(20 * time.Millisecond) // polling a condition, not timing
		}
		if code := c.Wait(p); code == 0 {
			t.Errorf("datanode %s exited 0", p.Dir)
		}
		log := c.ReadLog(p)
		for _, want := range []string{p.Dir, oldNS, newNS, "plasma datanode init"} {
			if !strings.Contains(log, want) {
				t.Errorf("datanode %s refusal lacks %q:\n%s", p.Dir, want, log)
			}
		}
		if got := volumeNamespace(t, p.Dir); got != oldNS {
			t.Errorf("volume %s namespace changed to %q", p.Dir, got)
		}
	}
	nodes, err := cl.Datanodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 0 {
		t.Fatalf("the new namespace knows the old volumes: %+v", nodes)
	}
	if _, err := cl.CopyIn(ctx, bytes.NewReader([]byte("x")), "/new", client.CopyOptions{Rep: 1}); err == nil {
		t.Fatal("a write got blocks with no datanode of this namespace alive")
	}
	// A new volume joins and serves.
	fresh := c.AddDatanode()
	c.WaitLive(1)
	// The namenode counts the datanode live once it answered the
	// registration; the datanode records the namespace when the answer
	// arrives.
	got := volumeNamespace(t, fresh.Dir)
	for deadline := time.Now().Add(10 * time.Second); got == "" && time.Now().Before(deadline); got = volumeNamespace(t, fresh.Dir) {
		time.Sleep(10 * time.Millisecond) // polling a condition, not timing a test
	}
	if got != newNS {
		t.Errorf("new volume recorded namespace %q, want %q", got, newNS)
	}
	testkit.WriteFile(t, cl, "/new", []byte("new namespace"), 1)
	if out := c.MustRun("fsck"); !strings.Contains(out, " 0 problems") {
		t.Fatalf("fsck:\n%s", out)
	}
}

// TestMetadataFilesPrivate: the namenode's database, WAL, shared-memory
// and commit log files, and backups of them, are readable by their owner
// only.
func TestMetadataFilesPrivate(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Datanodes: 1})
	cl := c.Client(client.Config{})
	defer cl.Close()
	testkit.WriteFile(t, cl, "/f", []byte("data"), 1)
	db := filepath.Join(c.Dir, "namenode.db")
	bak := filepath.Join(c.Dir, "backup.db")
	c.MustRun("admin", "backup", bak)
	for _, p := range []string{db, db + "-wal", db + "-shm", db + ".log", bak} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %04o, want 0600", p, st.Mode().Perm())
		}
	}
}

// TestBackupRestore: 'plasma admin backup' while the namenode runs, and
// 'plasma namenode backup' of a stopped (killed) one, are consistent
// copies: restored in place of the database, the namenode starts with
// exactly the files committed before each backup, and fsck is clean.
func TestBackupRestore(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Datanodes: 2})
	cl := c.Client(client.Config{})
	bs := int(c.Opts.Blocksize)
	before := map[string][]byte{}
	for i := 0; i < 20; i++ {
		name := fmt.Sprintf("/before-f%d", i)
		before[name] = testkit.RandomBytes(t, 1+i*bs/3)
		testkit.WriteFile(t, cl, name, before[name], 1+i%2)
	}
	online := filepath.Join(c.Dir, "online.db")
	if out := c.MustRun("admin", "backup", online); !strings.Contains(out, online) {
		t.Errorf("admin backup output: %s", out)
	}
	if _, code := c.Run(nil, "admin", "backup", online); code == 0 {
		t.Error("backup over an existing file succeeded")
	}
	after := testkit.RandomBytes(t, 3*bs)
	testkit.WriteFile(t, cl, "/after", after, 2)
	cl.Close()
	c.Kill(c.NN)
	db := filepath.Join(c.Dir, "namenode.db")
	offline := filepath.Join(c.Dir, "offline.db")
	c.MustRun("namenode", "backup", "-db", db, "-o", offline)

	restore := func(backup string) {
		t.Helper()
		if c.NN.Running() {
			c.Kill(c.NN)
		}
		for _, suffix := range []string{"", "-wal", "-shm", ".log"} {
			os.Remove(db + suffix)
		}
		b, err := os.ReadFile(backup)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(db, b, 0o600); err != nil {
			t.Fatal(err)
		}
		c.StartNamenode()
		c.WaitLive(2)
	}
	check := func(what string, wantAfter bool) {
		t.Helper()
		cl := c.Client(client.Config{})
		defer cl.Close()
		for name, data := range before {
			if got := testkit.ReadFile(t, cl, name); !bytes.Equal(got, data) {
				t.Errorf("%s: %s differs after restore", what, name)
			}
		}
		_, err := cl.Lookup(context.Background(), "/after")
		if wantAfter {
			if got := testkit.ReadFile(t, cl, "/after"); !bytes.Equal(got, after) {
				t.Errorf("%s: /after differs", what)
			}
		} else if err == nil {
			t.Errorf("%s: /after, committed after the backup, is there", what)
		}
		if out := c.MustRun("fsck"); !strings.Contains(out, " 0 problems") {
			t.Errorf("%s: fsck:\n%s", what, out)
		}
	}
	restore(online)
	check("online backup", false)
	restore(offline)
	check("offline backup", true)
}

// TestFsckLargeFileAndManyFiles: fsck of a file of more than 16,000
// blocks in one extent (one datanode answer used to be capped at 64 KiB,
// about 16,000 checksums) and of tens of thousands of files (more than one
// page of the namenode's scan) is clean and counts everything.
func TestFsckLargeFileAndManyFiles(t *testing.T) {
	const blocks = 16500
	c := clustertest.Start(t, clustertest.Options{Datanodes: 1, Blocksize: 64 << 10, Size: 20000 * 64 << 10})
	cl := c.Client(client.Config{})
	defer cl.Close()
	ctx := context.Background()
	size := int64(blocks) * c.Opts.Blocksize
	if _, err := cl.CopyIn(ctx, io.LimitReader(zeros{}, size), "/big", client.CopyOptions{Rep: 1}); err != nil {
		t.Fatal(err)
	}
	tx := cl.Begin()
	fi, err := tx.Lookup(ctx, "/big")
	if err != nil {
		t.Fatal(err)
	}
	xs, err := tx.Blocks(ctx, fi.Ino)
	tx.Abort(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// On the datanode the file is one run of over 16,384 blocks (its
	// extents in the metadata end where its allocations did).
	longest := 0
	for _, x := range testkit.DiskRuns(xs) {
		longest = max(longest, x.Count)
	}
	if longest <= 16384 {
		t.Fatalf("the file's longest run has %d blocks; the test needs one over 16,384", longest)
	}
	const files = 25000
	if err := cl.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
		if _, err := tx.Mkdir(ctx, "/many", 0); err != nil {
			return err
		}
		for i := 0; i < files; i++ {
			if _, err := tx.Create(ctx, fmt.Sprintf("/many/f%05d", i), client.CreateOptions{}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	out := c.MustRun("fsck")
	if want := fmt.Sprintf("fsck: %d files, %d blocks checked, 0 problems", files+1, blocks); !strings.Contains(out, want) {
		t.Fatalf("fsck output lacks %q:\n%s", want, out)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
