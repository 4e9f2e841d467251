package powercut

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clientx"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestKillDatanodeDuringWrite kills one of three datanodes in the middle
// of a write with replication 2. The write and its commit succeed (the
// dead datanode's new replicas are dropped, every block keeps one on a
// live datanode, later blocks go to the other two), the file reads back
// exactly, and fsck reports the blocks that lost their replica as
// under-replicated, and nothing else.
func TestKillDatanodeDuringWrite(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Datanodes: 3})
	cl := c.Client(client.Config{NoShortCircuit: true})
	defer cl.Close()
	ctx := context.Background()
	bs := int(c.Opts.Blocksize)
	const half = 50
	data := testkit.RandomBytes(t, 2*half*bs)
	tx := cl.Begin()
	f, err := tx.CreateFile(ctx, "/w", client.CreateOptions{Rep: 2})
	if err != nil {
		t.Fatal(err)
	}
	clientx.SetFlushBlocks(f, 8)
	if _, err := f.Write(data[:half*bs]); err != nil {
		t.Fatal(err)
	}
	if err := f.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// Half the data is on the datanodes now; kill one that holds some.
	xs, err := tx.Blocks(ctx, f.Ino())
	if err != nil || len(xs) == 0 {
		t.Fatalf("blocks: %v %v", xs, err)
	}
	victim := xs[0].Replicas[0].Addr
	lost := map[uint64]bool{} // file blocks with a replica on the victim
	for _, x := range xs {
		if len(x.Replicas) != 2 {
			t.Fatalf("blocks %d-%d have %d replicas before the kill, want 2", x.Index, x.Index+uint64(x.Count)-1, len(x.Replicas))
		}
		for _, r := range x.Replicas {
			if r.Addr == victim {
				for k := 0; k < x.Count; k++ {
					lost[x.Index+uint64(k)] = true
				}
			}
		}
	}
	for _, p := range c.DNs {
		if p.Addr == victim {
			c.Kill(p)
		}
	}
	if _, err := f.Write(data[half*bs:]); err != nil {
		tx.Abort(ctx)
		t.Fatalf("write after the kill of datanode %s: %v", victim, err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatalf("commit after the kill of datanode %s: %v", victim, err)
	}
	if got := testkit.ReadFile(t, cl, "/w"); !bytes.Equal(got, data) {
		t.Fatal("committed file reads back wrong")
	}
	// fsck: only blocks that had a replica on the victim may have one of
	// two now (the namenode copies them to the third datanode at once,
	// issue 23); no other problem, and soon none at all.
	rep, err := cl.Fsck(ctx)
	if err != nil {
		t.Fatal(err)
	}
	under := regexp.MustCompile(`^/w: blocks (\d+)-(\d+) have 1 of 2 replicas$`)
	reported := map[uint64]bool{}
	for _, p := range rep.Problems {
		m := under.FindStringSubmatch(p)
		if m == nil {
			t.Errorf("fsck problem other than under-replication: %s", p)
			continue
		}
		lo, _ := strconv.ParseUint(m[1], 10, 64)
		hi, _ := strconv.ParseUint(m[2], 10, 64)
		for b := lo; b <= hi; b++ {
			reported[b] = true
		}
	}
	for b := range reported {
		if !lost[b] {
			t.Errorf("fsck reports block %d under-replicated, which had no replica on the killed datanode:\n%s", b, strings.Join(rep.Problems, "\n"))
		}
	}
	if len(lost) == 0 {
		t.Error("no block had a replica on the killed datanode")
	}
	for deadline := time.Now().Add(60 * time.Second); len(rep.Problems) > 0; {
		if time.Now().After(deadline) {
			t.Fatalf("the blocks lost with the datanode are not re-replicated after 60s:\n%s", strings.Join(rep.Problems, "\n"))
		}
		time.Sleep(100 * time.Millisecond) // polling a condition, not timing the test
		if rep, err = cl.Fsck(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// TestKillDatanodeDuringRead kills a datanode while a file with two
// replicas is being read; the read completes from the other replica.
func TestKillDatanodeDuringRead(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Datanodes: 2})
	cl := c.Client(client.Config{NoShortCircuit: true})
	defer cl.Close()
	ctx := context.Background()
	bs := int(c.Opts.Blocksize)
	data := testkit.RandomBytes(t, 300*bs)
	testkit.WriteFile(t, cl, "/r2", data, 2)
	tx := cl.Begin()
	defer tx.Abort(ctx)
	f, err := tx.Open(ctx, "/r2")
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(data))
	if _, err := io.ReadFull(f, got[:100*bs]); err != nil {
		t.Fatal(err)
	}
	c.Kill(c.DNs[0])
	if _, err := io.ReadFull(f, got[100*bs:]); err != nil {
		t.Fatalf("read after datanode kill: %v", err)
	}
	if !bytes.Equal(got, data) {
		t.Fatal("read returned wrong bytes")
	}
	// A file whose only replica is gone gives a clear error, not garbage.
	c.StartDatanode(c.DNs[0])
	c.WaitLive(2)
	one := testkit.RandomBytes(t, 3*bs)
	testkit.WriteFile(t, cl, "/single", one, 1)
	tx2 := cl.Begin()
	defer tx2.Abort(ctx)
	sf, err := tx2.Open(ctx, "/single")
	if err != nil {
		t.Fatal(err)
	}
	xs, _ := tx2.Blocks(ctx, sf.Ino())
	for _, p := range c.DNs {
		if p.Addr == xs[0].Replicas[0].Addr {
			c.Kill(p)
		}
	}
	_, err = io.ReadAll(sf)
	if err == nil || !strings.Contains(err.Error(), "/single") {
		t.Fatalf("read of a file on a dead datanode: %v", err)
	}
}

// TestKillNamenodeDuringCommits kills the namenode with SIGKILL during a
// burst of commits from several clients; after a restart every
// acknowledged commit is there and fsck is clean.
func TestKillNamenodeDuringCommits(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Datanodes: 2})
	ctx := context.Background()
	var mu sync.Mutex
	acked := map[string][]byte{}
	const workers = 4
	var wg sync.WaitGroup
	enough := make(chan struct{})
	var once sync.Once
	for w := 0; w < workers; w++ {
		cl := c.Client(client.Config{})
		defer cl.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				name := fmt.Sprintf("/w%d-%d", w, i)
				data := []byte(strings.Repeat(name, 1+i%50))
				_, err := cl.CopyIn(ctx, bytes.NewReader(data), name, client.CopyOptions{Rep: 1 + i%2})
				if err != nil {
					return // the namenode is gone
				}
				mu.Lock()
				acked[name] = data
				n := len(acked)
				mu.Unlock()
				if n >= 300 {
					once.Do(func() { close(enough) })
				}
			}
		}()
	}
	// A client that lives through the restart, with a transaction open.
	survivor := c.Client(client.Config{})
	defer survivor.Close()
	oldTx := survivor.Begin()
	if _, err := oldTx.Lookup(ctx, "/"); err != nil {
		t.Fatal(err)
	}
	<-enough
	c.Kill(c.NN)
	wg.Wait()
	c.StartNamenode()
	c.WaitLive(2)
	// Its transaction is gone and says so; the client itself reconnects.
	oldTx.Lookup(ctx, "/")
	if _, err := oldTx.Lookup(ctx, "/"); !errors.Is(err, client.ErrTxn) {
		t.Fatalf("transaction across a namenode restart: %v, want ErrTxn", err)
	}
	if _, err := survivor.Lookup(ctx, "/"); err != nil {
		t.Fatalf("client did not reconnect: %v", err)
	}
	if err := survivor.Txn(ctx, func(ctx context.Context, tx *client.Txn) error { _, err := tx.Mkdir(ctx, "/after", 0); return err }); err != nil {
		t.Fatalf("new transaction after reconnect: %v", err)
	}
	cl := c.Client(client.Config{})
	defer cl.Close()
	for name, data := range acked {
		if got := testkit.ReadFile(t, cl, name); !bytes.Equal(got, data) {
			t.Fatalf("%s: acknowledged commit lost or wrong after namenode crash", name)
		}
	}
	t.Logf("%d acknowledged commits survived", len(acked))
	if out := c.MustRun("fsck"); !strings.Contains(out, " 0 problems") {
		t.Fatalf("fsck after crash:\n%s", out)
	}
	// Inode numbers are never reused across restarts.
	tx := cl.Begin()
	defer tx.Abort(ctx)
	fi, err := tx.Create(ctx, "/after-restart", client.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for name := range acked {
		old, err := tx.Lookup(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if old.Ino >= fi.Ino {
			t.Fatalf("new inode %d not above pre-crash inode %d (%s)", fi.Ino, old.Ino, name)
		}
	}
}

// TestFlippedByteServedFromReplica corrupts one byte of a block in a
// datanode's block file: reads detect it and use the other replica, and
// fsck reports the damaged block by path.
func TestFlippedByteServedFromReplica(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Datanodes: 2})
	ctx := context.Background()
	bs := int(c.Opts.Blocksize)
	data := testkit.RandomBytes(t, 10*bs)
	setup := c.Client(client.Config{})
	testkit.WriteFile(t, setup, "/flip", data, 2)
	tx := setup.Begin()
	fi, _ := tx.Lookup(ctx, "/flip")
	xs, err := tx.Blocks(ctx, fi.Ino)
	tx.Abort(ctx)
	setup.Close()
	if err != nil {
		t.Fatal(err)
	}
	rep := xs[0].Replicas[0]
	var vol string
	for _, p := range c.DNs {
		if p.Addr == rep.Addr {
			vol = p.Dir
		}
	}
	df, err := os.OpenFile(filepath.Join(vol, "data"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	off := int64(rep.Start+3)*int64(bs) + 1234
	b := make([]byte, 1)
	df.ReadAt(b, off)
	b[0] ^= 0xff
	df.WriteAt(b, off)
	df.Close()
	for _, sc := range []bool{false, true} {
		cl := c.Client(client.Config{NoShortCircuit: !sc})
		if got := testkit.ReadFile(t, cl, "/flip"); !bytes.Equal(got, data) {
			t.Fatalf("short-circuit=%v: corrupted block served", sc)
		}
		cl.Close()
	}
	out, code := c.Run(nil, "fsck")
	if code == 0 || !strings.Contains(out, "/flip: block 3") {
		t.Fatalf("fsck (exit %d) did not report the flipped byte:\n%s", code, out)
	}
}

// TestBadInput: every user mistake gets a one-line error naming the path
// or node and a non-zero exit code.
func TestBadInput(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Datanodes: 2, Size: 4 << 20})
	local := filepath.Join(t.TempDir(), "small")
	os.WriteFile(local, []byte("hello"), 0o644)
	big := filepath.Join(t.TempDir(), "big")
	os.WriteFile(big, testkit.RandomBytes(t, 9<<20), 0o644)
	c.MustRun("mkdir", "/dir")
	c.MustRun("put", local, "/dir/file")
	long := strings.Repeat("x", 300)
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"put", local, "relative/path"}, "not absolute"},
		{[]string{"get", "/missing", local + ".x"}, "/missing: no such file"},
		{[]string{"cat", "/dir"}, "/dir: is a directory"},
		{[]string{"ls", "/dir/file/x"}, "not a directory"},
		{[]string{"mkdir", "/dir/file/sub"}, "not a directory"},
		{[]string{"put", local, "/dir/file"}, "/dir/file: file exists"},
		{[]string{"put", local, "/" + long}, "too long"},
		{[]string{"rm", "/dir"}, "/dir: is a directory"},
		{[]string{"put", "-rep", "3", local, "/rep3"}, "replication 3 requested but only 2 datanodes are alive"},
		{[]string{"put", "-rep", "1", big, "/toolarge"}, "no space"},
		{[]string{"put", local}, "usage"},
		{[]string{"chmod", "999", "/dir"}, "bad mode"},
		{[]string{"frobnicate"}, "unknown command"},
		{[]string{"cat", "/nonexistent*"}, "no match"},
	}
	for _, tc := range cases {
		out, code := c.Run(nil, tc.args...)
		if code == 0 {
			t.Errorf("plasma %v: exit 0, output %q", tc.args, out)
			continue
		}
		if !strings.Contains(out, tc.want) {
			t.Errorf("plasma %v: output %q does not mention %q", tc.args, out, tc.want)
		}
		if strings.Contains(out, "goroutine") || strings.Contains(out, "panic") {
			t.Errorf("plasma %v: crashed:\n%s", tc.args, out)
		}
		if lines := strings.Count(strings.TrimSpace(out), "\n"); lines > 1 && !strings.Contains(out, "usage") {
			t.Errorf("plasma %v: %d-line error:\n%s", tc.args, lines+1, out)
		}
	}
	// Names with '/' or NUL through the API.
	cl := c.Client(client.Config{})
	defer cl.Close()
	ctx := context.Background()
	err := cl.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
		_, err := tx.Create(ctx, "/a\x00b", client.CreateOptions{})
		return err
	})
	if !errors.Is(err, client.ErrInvalid) {
		t.Errorf("NUL in name: %v", err)
	}
	// The failed full-volume put left nothing behind.
	if out := c.MustRun("fsck"); !strings.Contains(out, " 0 problems") {
		t.Fatalf("fsck: %s", out)
	}
	if out, _ := c.Run(nil, "ls", "/"); strings.Contains(out, "toolarge") {
		t.Errorf("failed put left a file: %s", out)
	}
}

// TestForeignDatanodesRefused: a datanode of another cluster or blocksize,
// or with a damaged volume, exits with a clear error.
func TestForeignDatanodesRefused(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Datanodes: 1})
	for _, tc := range []struct {
		cluster string
		bs      int64
		want    string
	}{
		{"othercluster", c.Opts.Blocksize, `belongs to cluster "othercluster"`},
		{c.Opts.Cluster, 2 * c.Opts.Blocksize, "blocksize"},
	} {
		dir := c.InitVolume(tc.cluster, tc.bs, 8<<20)
		p := &clustertest.Proc{Addr: "127.0.0.1:0", Dir: dir, Log: dir + ".log"}
		c.StartDatanode(p)
		if code := c.Wait(p); code == 0 {
			t.Errorf("%s: datanode exited 0", tc.want)
		}
		if log := c.ReadLog(p); !strings.Contains(log, tc.want) {
			t.Errorf("datanode log %q lacks %q", log, tc.want)
		}
	}
	dir := c.InitVolume(c.Opts.Cluster, c.Opts.Blocksize, 8<<20)
	os.WriteFile(filepath.Join(dir, "config"), []byte("{garbage"), 0o644)
	p := &clustertest.Proc{Addr: "127.0.0.1:0", Dir: dir, Log: dir + ".log"}
	c.StartDatanode(p)
	if code := c.Wait(p); code == 0 || !strings.Contains(c.ReadLog(p), "config is corrupt") {
		t.Errorf("corrupt volume: exit %d, log %q", code, c.ReadLog(p))
	}
	os.WriteFile(filepath.Join(dir, "config"), []byte(`{"identity":"x","cluster":"test","blocksize":65536,"blocks":9999}`), 0o644)
	c.StartDatanode(p)
	if code := c.Wait(p); code == 0 || !strings.Contains(c.ReadLog(p), "damaged") {
		t.Errorf("truncated volume: exit %d, log %q", code, c.ReadLog(p))
	}
}

// TestDeadDatanodeReportedAsDead: when a replica's datanode is dead and
// another datanode now answers at its address, a failed read says the
// datanode is down, not something about tickets.
func TestDeadDatanodeReportedAsDead(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Datanodes: 1})
	cl := c.Client(client.Config{})
	testkit.WriteFile(t, cl, "/g", testkit.RandomBytes(t, 2*int(c.Opts.Blocksize)), 1)
	cl.Close()
	old := c.DNs[0]
	c.Kill(old)
	other := &clustertest.Proc{Addr: old.Addr, Dir: c.InitVolume(c.Opts.Cluster, c.Opts.Blocksize, c.Opts.Size), Log: filepath.Join(c.Dir, "other.log")}
	c.DNs = append(c.DNs, other) // stopped with the cluster
	c.StartDatanode(other)
	c.WaitLive(1)
	out, code := c.RunEnv([]string{"PLASMAFS_NO_SHORTCIRCUIT=1"}, nil, "cat", "/g")
	if code == 0 {
		t.Fatal("read of a file whose only datanode is dead succeeded")
	}
	if !strings.Contains(out, "is down") {
		t.Fatalf("error does not say the datanode is down:\n%s", out)
	}
}
