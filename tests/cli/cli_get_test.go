package cli

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestGetLeavesNoPartialFile: a 'plasma get' that cannot read the whole
// file (the only datanode holding its later blocks is frozen, then dead)
// exits non-zero naming the file and block, and leaves neither a
// destination nor a temporary file behind; an existing destination is
// left as it was. Interrupted with Ctrl-C (SIGINT) while it waits for the
// frozen datanode, it stops and removes what it wrote too.
func TestGetLeavesNoPartialFile(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Datanodes: 2})
	bs := int(c.Opts.Blocksize)
	const nblocks = 300 // replication 1: runs of 128 blocks alternate between the datanodes
	data := testkit.RandomBytes(t, nblocks*bs)
	if out, code := c.Run(data, "put", "-rep", "1", "-stdin", "/big"); code != 0 {
		t.Fatal(out)
	}
	// The datanode holding the second run, which the first does not hold.
	cl := c.Client(client.Config{})
	ctx := context.Background()
	tx := cl.Begin()
	fi, err := tx.Lookup(ctx, "/big")
	if err != nil {
		t.Fatal(err)
	}
	xs, err := tx.Blocks(ctx, fi.Ino)
	tx.Abort(ctx)
	cl.Close()
	if err != nil || len(xs) < 2 {
		t.Fatalf("blocks: %v %v", xs, err)
	}
	first := xs[0].Replicas[0].Addr
	var victim *clustertest.Proc
	var lostAt uint64
	for _, x := range xs[1:] {
		if a := x.Replicas[0].Addr; a != first {
			for _, p := range c.DNs {
				if p.Addr == a {
					victim, lostAt = p, x.Index
				}
			}
			break
		}
	}
	if victim == nil {
		t.Fatalf("all blocks on one datanode: %+v", xs)
	}
	noSC := []string{"PLASMAFS_NO_SHORTCIRCUIT=1"}

	// 1. Frozen datanode: the get writes the first run, then waits for
	// block lostAt forever; Ctrl-C stops it and nothing is left.
	dir := t.TempDir()
	dst := filepath.Join(dir, "big.copy")
	syscall.Kill(testkit.DatanodePid(t, victim), syscall.SIGSTOP)
	cmd := exec.Command(c.Bin, "get", "/big", dst)
	cmd.Env = append(c.Env(), noSC...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	want := int64(lostAt) * int64(bs)
	deadline := time.Now().Add(60 * time.Second)
	for written(dir) < want {
		select {
		case <-exited:
			t.Fatalf("get exited (%v) before it was interrupted:\n%s", cmd.ProcessState, out.String())
		case <-time.After(10 * time.Millisecond): // polling a condition
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("get wrote %d bytes in 60s, expected %d before the frozen datanode", written(dir), want)
		}
	}
	cmd.Process.Signal(os.Interrupt)
	select {
	case <-exited:
	case <-time.After(60 * time.Second): // a bound against hanging, not a timing assertion
		cmd.Process.Kill()
		<-exited
		t.Errorf("get did not stop within 60s of SIGINT (blocked on the frozen datanode?)")
	}
	if cmd.ProcessState.ExitCode() == 0 {
		t.Errorf("interrupted get exited 0:\n%s", out.String())
	}
	t.Logf("interrupted get: %s", strings.TrimSpace(out.String()))
	assertEmpty(t, dir, "after an interrupted get")

	// 2. Dead datanode: the get fails with an error naming the file and
	// the block, and leaves nothing.
	c.Kill(victim)
	msg, code := c.RunEnv(noSC, nil, "get", "/big", dst)
	if code == 0 {
		t.Fatalf("get of a file with a lost block exited 0:\n%s", msg)
	}
	if !strings.Contains(msg, "/big") || !strings.Contains(msg, "block "+strconv.FormatUint(lostAt, 10)) {
		t.Errorf("error does not name the file and the lost block %d: %q", lostAt, msg)
	}
	if strings.Count(strings.TrimSpace(msg), "\n") > 0 {
		t.Errorf("error is not one line: %q", msg)
	}
	t.Logf("failed get: %s", strings.TrimSpace(msg))
	assertEmpty(t, dir, "after a failed get")

	// 3. An existing destination is not touched by a failed get.
	old := []byte("the previous contents\n")
	if err := os.WriteFile(dst, old, 0o644); err != nil {
		t.Fatal(err)
	}
	if msg, code := c.RunEnv(noSC, nil, "get", "/big", dst); code == 0 {
		t.Fatalf("get exited 0:\n%s", msg)
	}
	if got, err := os.ReadFile(dst); err != nil || !bytes.Equal(got, old) {
		t.Errorf("failed get changed the existing destination: %v, %d bytes", err, len(got))
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("failed get left files beside the destination: %v", names(ents))
	}

	// 4. A readable file still arrives whole, under its name only, and
	// replaces the old contents.
	small := data[:int(lostAt)*bs]
	if out, code := c.Run(small, "put", "-rep", "1", "-stdin", "/small"); code != 0 {
		t.Fatal(out)
	}
	c.MustRun("get", "/small", dst)
	if got, err := os.ReadFile(dst); err != nil || !bytes.Equal(got, small) {
		t.Errorf("get of a readable file: %v, %d bytes, want %d", err, len(got), len(small))
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("get left extra files: %v", names(ents))
	}
}

// written is the total size of the files in dir.
func written(dir string) int64 {
	var n int64
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if fi, err := e.Info(); err == nil {
			n += fi.Size()
		}
	}
	return n
}

func names(ents []os.DirEntry) []string {
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

func assertEmpty(t *testing.T, dir, when string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) > 0 {
		t.Errorf("%s the destination directory holds %v; want nothing (no partial file, no temporary)", when, names(ents))
	}
}

// TestReadStopsWhenContextCancelled is the library half of an interrupted
// get: a File uses the context it was opened with for its io methods, so
// once that context is cancelled a read must return (with the context's
// error) even when the datanode it reads from has stopped answering on a
// connection the client already holds. It must not wait for the frozen
// datanode forever (a stuck goroutine that Client.Close does not free
// either).
func TestReadStopsWhenContextCancelled(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Datanodes: 2})
	bs := int64(c.Opts.Blocksize)
	data := testkit.RandomBytes(t, 300*int(bs)) // replication 1: blocks 128-255 on the other datanode
	if out, code := c.Run(data, "put", "-rep", "1", "-stdin", "/big"); code != 0 {
		t.Fatal(out)
	}
	cl := c.Client(client.Config{NoShortCircuit: true})
	defer cl.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tx := cl.Begin()
	f, err := tx.Open(ctx, "/big")
	if err != nil {
		t.Fatal(err)
	}
	xs, err := tx.Blocks(ctx, f.Ino())
	xs = testkit.DiskRuns(xs)
	if err != nil || len(xs) < 2 || xs[1].Index != 128 || xs[1].Replicas[0].Addr == xs[0].Replicas[0].Addr {
		t.Fatalf("blocks: %+v %v", xs, err)
	}
	// Read a block from each datanode, so the client holds a connection
	// to each; then freeze the second.
	buf := make([]byte, bs)
	for _, off := range []int64{0, 128 * bs} {
		if _, err := f.ReadAt(buf, off); err != nil {
			t.Fatal(err)
		}
	}
	frozen := xs[1].Replicas[0].Addr
	for _, p := range c.DNs {
		if p.Addr == frozen {
			syscall.Kill(testkit.DatanodePid(t, p), syscall.SIGSTOP)
		}
	}
	// A block after 128 (not read yet, past the read-ahead of the first
	// read) that the frozen datanode holds: where the allocator put each
	// block may vary with load.
	var next uint64
	for _, x := range xs {
		for i := uint64(0); i < uint64(x.Count) && next == 0; i++ {
			if x.Index+i > 128 && x.Replicas[0].Addr == frozen {
				next = x.Index + i
			}
		}
	}
	if next == 0 {
		t.Fatalf("no block after 128 on the frozen datanode: %+v", xs)
	}
	cancel()
	done := make(chan error, 1)
	go func() { _, err := f.ReadAt(buf, int64(next)*bs); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("read with a cancelled context from a frozen datanode: %v, want context.Canceled", err)
		}
	case <-time.After(30 * time.Second): // a bound against hanging, not a timing assertion
		t.Errorf("read from a frozen datanode still blocked 30s after its context was cancelled")
	}
}
