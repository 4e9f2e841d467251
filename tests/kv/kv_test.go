package kv

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/kv"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestKVCommands runs every 'plasma kv' subcommand against a cluster of
// real processes, with the original's options.
func TestKVCommands(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	ok := func(stdin []byte, args ...string) string {
		t.Helper()
		out, code := c.Run(stdin, args...)
		if code != 0 {
			t.Fatalf("plasma %s: exit %d: %s", strings.Join(args, " "), code, out)
		}
		return out
	}
	fails := func(want int, stdin []byte, args ...string) string {
		t.Helper()
		out, code := c.Run(stdin, args...)
		if code != want {
			t.Fatalf("plasma %s: exit %d, want %d: %s", strings.Join(args, " "), code, want, out)
		}
		return out
	}
	ok(nil, "kv", "create", "-db", "/kv/db", "-max-key-length", "20", "-rep", "2")
	fails(1, nil, "kv", "create", "-db", "/kv/db")
	fails(2, nil, "kv", "create")
	ok([]byte("value from stdin"), "kv", "insert", "-db", "/kv/db", "alpha")

	dir := t.TempDir()
	files := map[string][]byte{"f1.txt": []byte("first file"), "f2.bin": testkit.RandomBytes(t, 200000), "empty": {}}
	var paths []string
	for _, n := range []string{"f1.txt", "f2.bin", "empty"} {
		p := filepath.Join(dir, n)
		os.WriteFile(p, files[n], 0o644)
		paths = append(paths, p)
	}
	ok(nil, append([]string{"kv", "insert", "-db", "/kv/db", "-files"}, paths...)...)
	ok(nil, "kv", "insert", "-db", "/kv/db", "-keys-and-files", "beta", paths[0], "gamma", paths[1])
	ok([]byte("delta\t"+filepath.Join(dir, "f1.txt")+"\nepsilon "+filepath.Join(dir, "f2.bin")+"\n"), "kv", "insert", "-db", "/kv/db", "-keys-and-files")
	out := fails(1, []byte("x"), "kv", "insert", "-db", "/kv/db", strings.Repeat("k", 21))
	if !strings.Contains(out, "key too long") {
		t.Fatalf("long key: %s", out)
	}

	if out := ok(nil, "kv", "lookup", "-db", "/kv/db", "alpha", "nope", "f1.txt"); out != "value from stdin\nNOT_FOUND\nfirst file\n" {
		t.Fatalf("lookup: %q", out)
	}
	if out := ok(nil, "kv", "lookup", "-db", "/kv/db", "-no-lf", "-not-found", "-", "alpha", "nope"); out != "value from stdin-" {
		t.Fatalf("lookup -no-lf: %q", out)
	}
	if out := ok([]byte("gamma\nepsilon\n"), "kv", "lookup", "-db", "/kv/db", "-stdin", "-no-lf"); out != string(files["f2.bin"])+string(files["f2.bin"]) {
		t.Fatalf("lookup -stdin: %d bytes", len(out))
	}
	keys := "alpha\nbeta\ndelta\nempty\nepsilon\nf1.txt\nf2.bin\ngamma\n"
	if out := ok(nil, "kv", "iterate", "-db", "/kv/db"); out != keys {
		t.Fatalf("iterate: %q", out)
	}
	if out := ok(nil, "kv", "iterate", "-db", "/kv/db", "-count"); out != "8\n" {
		t.Fatalf("iterate -count: %q", out)
	}
	if out := ok(nil, "kv", "iterate", "-db", "/kv/db", "-prefix", "f"); out != "f1.txt\nf2.bin\n" {
		t.Fatalf("iterate -prefix: %q", out)
	}
	if out := ok(nil, "kv", "iterate", "-db", "/kv/db", "-from", "beta", "-to", "empty"); out != "beta\ndelta\nempty\n" {
		t.Fatalf("iterate -from -to: %q", out)
	}
	if out := ok(nil, "kv", "iterate", "-db", "/kv/db", "-count", "-from", "c", "-to", "f"); out != "3\n" {
		t.Fatalf("iterate -count -from -to: %q", out)
	}
	ok(nil, "kv", "delete", "-db", "/kv/db", "alpha", "not-there")
	ok([]byte("beta\ngamma\n"), "kv", "delete", "-db", "/kv/db", "-stdin")
	if out := ok(nil, "kv", "iterate", "-db", "/kv/db"); out != "delta\nempty\nepsilon\nf1.txt\nf2.bin\n" {
		t.Fatalf("after delete: %q", out)
	}
	stat := ok(nil, "kv", "stat", "-db", "/kv/db")
	if !strings.Contains(stat, "keys:           5\n") {
		t.Fatalf("stat: %s", stat)
	}
	vac := ok(nil, "kv", "vacuum", "-db", "/kv/db")
	if !strings.Contains(vac, "5 keys") {
		t.Fatalf("vacuum: %s", vac)
	}
	if out := ok(nil, "kv", "stat", "-db", "/kv/db"); !strings.Contains(out, "garbage:        0\n") {
		t.Fatalf("stat after vacuum: %s", out)
	}
	if out := ok(nil, "kv", "lookup", "-db", "/kv/db", "-no-lf", "epsilon"); out != string(files["f2.bin"]) {
		t.Fatalf("after vacuum: %d bytes", len(out))
	}
	if out := ok(nil, "stat", "/kv/db/kv"); !strings.Contains(out, "rep") && !strings.Contains(out, "2") {
		t.Fatalf("stat of the database file: %s", out)
	}

	// A second writer (here the Go API holds the lock) is refused at once.
	cl := c.Client(client.Config{})
	defer cl.Close()
	ctx := context.Background()
	db, err := kv.Open(ctx, cl, "/kv/db", kv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	w, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out = fails(1, []byte("v"), "kv", "insert", "-db", "/kv/db", "zeta")
	if !strings.Contains(out, "locked by another writer") {
		t.Fatalf("second writer: %s", out)
	}
	fails(1, nil, "kv", "vacuum", "-db", "/kv/db")
	w.Abort(ctx)
	ok([]byte("v"), "kv", "insert", "-db", "/kv/db", "zeta")
}

// TestKVWriterKilled: 'plasma kv insert' processes are killed with
// SIGKILL at random moments of a batch (streaming values, writing the
// index, committing). Each time the database is afterwards exactly the
// version before or the version after the batch, never anything else,
// and the next writer gets the lock at once. One kill lands while a
// large value streams in, mid-file.
func TestKVWriterKilled(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	ctx := context.Background()
	cl := c.Client(client.Config{})
	defer cl.Close()
	if err := kv.Create(ctx, cl, "/db", kv.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	db, err := kv.Open(ctx, cl, "/db", kv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	m := map[string][]byte{}
	check := func(want map[string][]byte) error {
		s := db.Snapshot()
		defer s.Release()
		if s.Len() != int64(len(want)) {
			return fmt.Errorf("%d keys, want %d", s.Len(), len(want))
		}
		for k, v := range want {
			got, err := s.Get([]byte(k))
			if err != nil || !bytes.Equal(got, v) {
				return fmt.Errorf("key %s: %d bytes, %v", k, len(got), err)
			}
		}
		return nil
	}

	// 1. Killed while a large value is being streamed from stdin.
	cmd := exec.Command(c.Bin, "kv", "insert", "-db", "/db", "huge")
	cmd.Env = c.Env()
	in, _ := cmd.StdinPipe()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	chunk := testkit.RandomBytes(t, 1<<20)
	for i := 0; i < 12; i++ { // the pipe holds 64 KiB: these were read and mostly written
		if _, err := in.Write(chunk); err != nil {
			t.Fatalf("stdin: %v (%s)", err, out.String())
		}
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	in.Close()
	db.Refresh(ctx)
	if err := check(m); err != nil {
		t.Fatalf("after a kill mid-value: %v", err)
	}

	// 2. Batches of files killed after random delays (the first runs to
	// its end and is timed).
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(11, 12))
	outcomes := map[string]int{}
	var full time.Duration // how long an uninterrupted batch takes
	for round := 0; round < 16; round++ {
		next := map[string][]byte{}
		for k, v := range m {
			next[k] = v
		}
		var lines strings.Builder
		for i := 0; i < 40; i++ {
			k := fmt.Sprintf("r%02d-k%02d", round, i)
			if i%5 == 0 && round > 0 {
				k = fmt.Sprintf("r%02d-k%02d", round-1, i) // replace an older one
			}
			v := testkit.RandomBytes(t, 1+r.IntN(100000))
			p := filepath.Join(dir, fmt.Sprintf("v%d-%d", round, i))
			os.WriteFile(p, v, 0o644)
			next[k] = v
			fmt.Fprintf(&lines, "%s\t%s\n", k, p)
		}
		cmd := exec.Command(c.Bin, "kv", "insert", "-db", "/db", "-keys-and-files")
		cmd.Env = c.Env()
		cmd.Stdin = strings.NewReader(lines.String())
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		start := time.Now()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if round > 0 {
			// Where the kill lands, uniformly over the first round's
			// whole run (process start included): not a timing
			// assumption, any outcome is checked.
			time.Sleep(time.Duration(r.Int64N(int64(full) * 5 / 4)))
			cmd.Process.Signal(syscall.SIGKILL)
		}
		cmd.Wait()
		if round == 0 {
			full = time.Since(start)
		}
		if err := db.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		switch {
		case check(m) == nil:
			outcomes["before"]++
		case check(next) == nil:
			outcomes["after"]++
			m = next
		default:
			t.Fatalf("round %d: neither the old version (%v) nor the new one (%v)", round, check(m), check(next))
		}
		// The lock went with the killed process.
		w, err := db.Begin(ctx)
		if err != nil {
			t.Fatalf("round %d: next writer: %v", round, err)
		}
		w.Abort(ctx)
	}
	t.Logf("outcomes of killed batches: %v", outcomes)
	// Once more to the end, then fsck finds nothing wrong.
	if out, code := c.Run([]byte("last"), "kv", "insert", "-db", "/db", "last"); code != 0 {
		t.Fatal(out)
	}
	if out, code := c.Run(nil, "fsck"); code != 0 {
		t.Fatalf("fsck: %s", out)
	}
}

// TestKVServe runs 'plasma kv serve' as a process: GET, HEAD, 404,
// keep-alive, refresh by POST and by interval, and writes with -writable.
func TestKVServe(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	c.MustRun("kv", "create", "-db", "/web")
	big := testkit.RandomBytes(t, 700000)
	if out, code := c.Run(big, "kv", "insert", "-db", "/web", "big"); code != 0 {
		t.Fatal(out)
	}
	if out, code := c.Run([]byte("hello"), "kv", "insert", "-db", "/web", "hello"); code != 0 {
		t.Fatal(out)
	}
	cmd := exec.Command(c.Bin, "kv", "serve", "-db", "/web", "-listen", "127.0.0.1:0", "-refresh", "0", "-writable")
	cmd.Env = c.Env()
	cmd.Stderr = os.Stderr
	stdoutPipe, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	defer func() { cmd.Process.Signal(syscall.SIGTERM); <-done }()
	sc := bufio.NewScanner(stdoutPipe)
	if !sc.Scan() {
		t.Fatal("serve printed nothing")
	}
	line := sc.Text()
	go func() {
		for sc.Scan() {
		}
		cmd.Wait()
		close(done)
	}()
	addr, _, _ := strings.Cut(strings.TrimPrefix(line, "listening on "), " ")
	base := addr // http://HOST:PORT
	tr := &http.Transport{MaxIdleConnsPerHost: 1}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	get := func(method, path string, body io.Reader) (int, []byte, http.Header) {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, body)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b, resp.Header
	}
	if code, b, _ := get("GET", "/hello", nil); code != 200 || string(b) != "hello" {
		t.Fatalf("GET /hello: %d %q", code, b)
	}
	if code, b, _ := get("GET", "/big", nil); code != 200 || !bytes.Equal(b, big) {
		t.Fatalf("GET /big: %d, %d bytes", code, len(b))
	}
	if code, _, h := get("HEAD", "/big", nil); code != 200 || h.Get("Content-Length") != fmt.Sprint(len(big)) {
		t.Fatalf("HEAD /big: %d %v", code, h)
	}
	if code, _, _ := get("GET", "/missing", nil); code != 404 {
		t.Fatalf("GET /missing: %d", code)
	}
	// A commit by another process shows after POST /-/refresh.
	if out, code := c.Run([]byte("new"), "kv", "insert", "-db", "/web", "new"); code != 0 {
		t.Fatal(out)
	}
	if code, _, _ := get("GET", "/new", nil); code != 404 {
		t.Fatalf("GET /new before refresh: %d", code)
	}
	if code, b, _ := get("POST", "/-/refresh", nil); code != 200 || !strings.HasPrefix(string(b), "version 4") {
		t.Fatalf("refresh: %d %q", code, b)
	}
	if code, b, _ := get("GET", "/new", nil); code != 200 || string(b) != "new" {
		t.Fatalf("GET /new after refresh: %d %q", code, b)
	}
	// Writes through the server are committed before the answer.
	if code, _, _ := get("PUT", "/put%2Fkey", strings.NewReader("put value")); code != 204 {
		t.Fatalf("PUT: %d", code)
	}
	if code, _, _ := get("DELETE", "/hello", nil); code != 204 {
		t.Fatalf("DELETE: %d", code)
	}
	if out := c.MustRun("kv", "lookup", "-db", "/web", "put/key", "hello"); out != "put value\nNOT_FOUND\n" {
		t.Fatalf("after PUT and DELETE: %q", out)
	}
	// A writer holding the lock makes PUT answer 409.
	cl := c.Client(client.Config{})
	defer cl.Close()
	ctx := context.Background()
	db, err := kv.Open(ctx, cl, "/web", kv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	w, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if code, b, _ := get("PUT", "/blocked", strings.NewReader("x")); code != 409 {
		t.Fatalf("PUT while locked: %d %s", code, b)
	}
	w.Abort(ctx)
	db.Close()
	cl.Close()

	// The namenode restarts: the server's snapshot lost its transaction.
	// Lookups go on (after one refresh if reads are refused), and so do
	// writes and refreshes.
	c.Kill(c.NN)
	c.StartNamenode()
	c.WaitLive(len(c.DNs))
	for _, k := range []string{"/big", "/put%2Fkey", "/new"} {
		if code, b, _ := get("GET", k, nil); code != 200 || len(b) == 0 {
			t.Fatalf("GET %s after the namenode restarted: %d %q", k, code, b)
		}
	}
	if code, b, _ := get("PUT", "/after-restart", strings.NewReader("ok")); code != 204 {
		t.Fatalf("PUT after the namenode restarted: %d %s", code, b)
	}
	if code, b, _ := get("GET", "/after-restart", nil); code != 200 || string(b) != "ok" {
		t.Fatalf("GET after the restart: %d %q", code, b)
	}
}

// TestKVValueOneGiB: a 1 GiB value goes in through 'plasma kv insert'
// from stdin and out through 'plasma kv lookup' to stdout, streamed: the
// bytes match, and neither process grows anywhere near the value's size
// (their peak RSS is checked).
func TestKVValueOneGiB(t *testing.T) {
	if testing.Short() {
		t.Skip("1 GiB")
	}
	const size = 1 << 30
	c := clustertest.Start(t, clustertest.Options{Datanodes: 2, Size: size/2 + 256<<20})
	c.MustRun("kv", "create", "-db", "/big", "-rep", "1")
	gen := func() io.Reader { return io.LimitReader(rand.NewChaCha8([32]byte{42}), size) }
	want := sha256.New()
	io.Copy(want, gen())

	run := func(stdin io.Reader, stdout io.Writer, args ...string) int64 {
		t.Helper()
		cmd := exec.Command(c.Bin, args...)
		cmd.Env = c.Env()
		cmd.Stdin, cmd.Stdout = stdin, stdout
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("plasma %v: %v: %s", args, err, stderr.String())
		}
		return cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss << 10
	}
	rssIn := run(gen(), io.Discard, "kv", "insert", "-db", "/big", "value")
	got := sha256.New()
	rssOut := run(nil, got, "kv", "lookup", "-db", "/big", "-no-lf", "value")
	if !bytes.Equal(got.Sum(nil), want.Sum(nil)) {
		t.Fatal("the value read back differs")
	}
	t.Logf("peak RSS: insert %d MiB, lookup %d MiB", rssIn>>20, rssOut>>20)
	if rssIn > 256<<20 || rssOut > 256<<20 {
		t.Fatalf("a process held much of the value: peak RSS insert %d MiB, lookup %d MiB", rssIn>>20, rssOut>>20)
	}
}
