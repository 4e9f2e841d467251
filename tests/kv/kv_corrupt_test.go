package kv

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestKVServeCorruptBlock flips a byte of a datanode's block file under a
// value of a one-replica database: 'plasma kv serve' (which skips the
// per-request value checksum for cached blocks, relying on the block
// checksum checked when a block is read) answers 500 for that value, on
// the fast path and on net/http's, and keeps serving the intact ones.
func TestKVServeCorruptBlock(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Datanodes: 1})
	bs := int(c.Opts.Blocksize)
	c.MustRun("kv", "create", "-db", "/cor", "-rep", "1")
	// Three blocks' worth, within what the server reads through its block
	// cache (values up to max(4 blocks, 256 KiB)); its middle block holds
	// nothing but value bytes wherever the value starts (the index and
	// trailer follow the value).
	big := testkit.RandomBytes(t, 2*bs+1000)
	if out, code := c.Run(big, "kv", "insert", "-db", "/cor", "big"); code != 0 {
		t.Fatal(out)
	}
	if out, code := c.Run([]byte("small value"), "kv", "insert", "-db", "/cor", "small"); code != 0 {
		t.Fatal(out)
	}

	cl := c.Client(client.Config{})
	ctx := context.Background()
	tx := cl.Begin()
	fi, err := tx.Lookup(ctx, "/cor/kv")
	if err != nil {
		t.Fatal(err)
	}
	xs, err := tx.Blocks(ctx, fi.Ino)
	tx.Abort(ctx)
	cl.Close()
	if err != nil {
		t.Fatal(err)
	}
	// Flip one byte in the middle of the file's block 1, inside the value.
	var vol, addr string
	var start uint64
	for _, x := range xs {
		if x.Index <= 1 && 1 < x.Index+uint64(x.Count) {
			rep := x.Replicas[0]
			addr, start = rep.Addr, rep.Start+(1-x.Index)
		}
	}
	for _, p := range c.DNs {
		if p.Addr == addr {
			vol = p.Dir
		}
	}
	if vol == "" {
		t.Fatalf("no replica of block 1 of /cor/kv in %+v", xs)
	}
	df, err := os.OpenFile(filepath.Join(vol, "data"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	off := int64(start)*int64(bs) + int64(bs)/2
	b := make([]byte, 1)
	if _, err := df.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x40
	if _, err := df.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
	df.Close()

	cmd := exec.Command(c.Bin, "kv", "serve", "-db", "/cor", "-listen", "127.0.0.1:0", "-refresh", "0")
	cmd.Env = c.Env()
	cmd.Stderr = os.Stderr
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	defer func() { cmd.Process.Signal(syscall.SIGTERM); <-done }()
	sc := bufio.NewScanner(stdout)
	if !sc.Scan() {
		t.Fatal("serve printed nothing")
	}
	base, _, _ := strings.Cut(strings.TrimPrefix(sc.Text(), "listening on "), " ")
	go func() {
		for sc.Scan() {
		}
		cmd.Wait()
		close(done)
	}()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	get := func(path string) (int, []byte) {
		t.Helper()
		resp, err := hc.Get(base + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, body
	}
	// Twice: the first read fails on the checksum; the second must not
	// find a bad block cached either. "?" sends the request to net/http.
	for _, path := range []string{"/big", "/big", "/big?via=net/http"} {
		code, body := get(path)
		if code < 500 || bytes.Contains(body, big[bs:bs+100]) {
			t.Fatalf("GET %s of a corrupt value: %d, %d bytes", path, code, len(body))
		}
		if !strings.Contains(string(body), "block 1") {
			t.Fatalf("GET %s: the error does not name the block: %q", path, body)
		}
		t.Logf("GET %s: %d %s", path, code, bytes.TrimSpace(body))
	}
	if code, body := get("/small"); code != 200 || string(body) != "small value" {
		t.Fatalf("GET /small: %d %q", code, body)
	}
}
