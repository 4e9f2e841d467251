package extend

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// appLine is one line of the FUSE test's log: writer, sequence number, a
// hex payload and the CRC32 of the rest.
func appLine(w, seq, n int) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = "0123456789abcdef"[(w*7+seq*13+i)%16]
	}
	body := fmt.Sprintf("w%d s%d %s", w, seq, p)
	return []byte(fmt.Sprintf("%s %08x\n", body, crc32.ChecksumIEEE([]byte(body))))
}

// appParseLine checks one line (without its newline).
func appParseLine(l string) (appID, bool) {
	i := strings.LastIndexByte(l, ' ')
	if i < 0 || fmt.Sprintf("%08x", crc32.ChecksumIEEE([]byte(l[:i]))) != l[i+1:] {
		return appID{}, false
	}
	var id appID
	if _, err := fmt.Sscanf(l[:i], "w%d s%d", &id.w, &id.seq); err != nil {
		return appID{}, false
	}
	return id, true
}

// appParseLines checks that data is whole, intact lines (the first may be
// cut when partial is set: a tail of the file).
func appParseLines(data []byte, partial bool) ([]appID, error) {
	if len(data) == 0 {
		return nil, nil
	}
	if data[len(data)-1] != '\n' {
		return nil, fmt.Errorf("%d bytes that do not end with a whole line: ...%q", len(data), data[max(0, len(data)-40):])
	}
	lines := strings.Split(string(data[:len(data)-1]), "\n")
	if partial {
		lines = lines[1:]
	}
	var out []appID
	for _, l := range lines {
		id, ok := appParseLine(l)
		if !ok {
			return out, fmt.Errorf("a damaged line (%d bytes): %.60q", len(l), l)
		}
		out = append(out, id)
	}
	return out, nil
}

// TestExtensionFUSEChild is the appender process of TestExtensionFUSEAppends
// (the test binary run again); it does nothing in a normal run.
func TestExtensionFUSEChild(t *testing.T) {
	path := os.Getenv("APPEND_CHILD_FILE")
	if path == "" {
		t.Skip("the appender process of TestExtensionFUSEAppends")
	}
	w, _ := strconv.Atoi(os.Getenv("APPEND_CHILD_ID"))
	n, _ := strconv.Atoi(os.Getenv("APPEND_CHILD_LINES"))
	for seq := 0; seq < n; seq++ {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(appLine(w, seq, 1+(seq*37)%300)); err != nil {
			t.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
		f.Close()
		fmt.Printf("appended %d\n", seq)
	}
}

// TestExtensionFUSEAppends: through one FUSE mount (rep 2), three goroutines
// and two processes append lines with O_APPEND, each line fsynced; one
// process is killed with SIGKILL after a few of its lines. Meanwhile
// readers read the file's tail through this mount and through a second one
// as 'tail -c' does (the real command, and seek-to-end reads). Every tail
// must be the bytes
// the file holds at that offset at the end (the file only grows: every
// committed version is a prefix of the last; a tail may end inside a line
// when a version was committed while a write was arriving in pieces). At
// the end the file, read through the mount and through the client
// library, holds every fsynced line exactly once and nothing but whole
// lines; fsck is clean. (Until 5efad75, tail readers in the writing mount
// read wrong bytes, before this feature too:
// TestExtensionFUSEWriterMountReadsWrongBytes.)
func TestExtensionFUSEAppends(t *testing.T) {
	testkit.NeedFUSE(t)
	c := clustertest.Start(t, clustertest.Options{})
	m := testkit.StartMount(t, c, "rep=2")
	m2 := testkit.StartMount(t, c, "ttl=0")
	ctx := context.Background()
	path := m.Path("log")
	base := bytes.Repeat(appLine(9, 0, 200), 180) // about 40 KB of whole lines
	testkit.MustOK(t, "create", os.WriteFile(path, base, 0o644))

	var mu sync.Mutex
	acked := map[appID]bool{}
	errs := make(chan error, 100)
	var wg sync.WaitGroup
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seq := 0; seq < 40; seq++ {
				n := 1 + (seq*53+w*11)%400
				if seq%13 == 7 {
					n = 30000
				}
				f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
				if err == nil {
					_, err = f.Write(appLine(w, seq, n))
					if err == nil {
						err = f.Sync()
					}
					if cerr := f.Close(); err == nil {
						err = cerr
					}
				}
				if err != nil {
					errs <- fmt.Errorf("appender %d line %d: %w", w, seq, err)
					return
				}
				mu.Lock()
				acked[appID{w, seq}] = true
				mu.Unlock()
			}
		}()
	}
	// Two appender processes; the second is killed after 5 lines.
	child := func(w, lines int) (*exec.Cmd, *bufio.Scanner) {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestExtensionFUSEChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), "APPEND_CHILD_FILE="+path, fmt.Sprintf("APPEND_CHILD_ID=%d", w), fmt.Sprintf("APPEND_CHILD_LINES=%d", lines))
		out, err := cmd.StdoutPipe()
		testkit.MustOK(t, "child pipe", err)
		cmd.Stderr = os.Stderr
		testkit.MustOK(t, "start child", cmd.Start())
		return cmd, bufio.NewScanner(out)
	}
	for _, ch := range []struct{ w, lines, kill int }{{5, 40, -1}, {6, 1000, 5}} {
		cmd, sc := child(ch.w, ch.lines)
		wg.Add(1)
		go func() {
			defer wg.Done()
			got := 0
			for sc.Scan() {
				var seq int
				if _, err := fmt.Sscanf(sc.Text(), "appended %d", &seq); err != nil {
					continue
				}
				mu.Lock()
				acked[appID{ch.w, seq}] = true
				mu.Unlock()
				got++
				if got == ch.kill {
					cmd.Process.Kill()
				}
			}
			err := cmd.Wait()
			if ch.kill < 0 && err != nil {
				errs <- fmt.Errorf("appender process %d: %v", ch.w, err)
			}
			if got < min(ch.lines, max(ch.kill, 0)) {
				errs <- fmt.Errorf("appender process %d acknowledged %d lines", ch.w, got)
			}
		}()
	}
	// Tail readers until the appenders are done. A tail that is not whole
	// lines is kept and compared with the final file at the end.
	type badTail struct {
		how  string
		off  int64 // -1: tail(1), the offset is not known
		data []byte
		err  error
	}
	var bad []badTail
	var stop atomic.Bool
	var rwg sync.WaitGroup
	tails := 0
	for _, mp := range []*testkit.Mount{m, m2} {
		p := mp.Path("log")
		rwg.Add(2)
		go func() {
			defer rwg.Done()
			for i := 0; !stop.Load() || i < 2; i++ {
				out, err := exec.Command("tail", "-c", strconv.Itoa(300+i%5*9000), p).Output()
				if err != nil {
					errs <- fmt.Errorf("tail -c %s: %v", p, err)
					return
				}
				if _, err := appParseLines(out, true); err != nil {
					mu.Lock()
					bad = append(bad, badTail{"tail -c of " + p, -1, out, err})
					mu.Unlock()
				}
			}
		}()
		go func() {
			defer rwg.Done()
			for i := 0; !stop.Load() || i < 2; i++ {
				f, err := os.Open(p)
				if err != nil {
					errs <- err
					return
				}
				st, err := f.Stat()
				if err == nil {
					off := max(0, st.Size()-int64(500+i%7*5000))
					buf := make([]byte, st.Size()-off)
					var n int
					n, err = f.ReadAt(buf, off)
					if err == io.EOF {
						err = nil
					}
					if err == nil {
						if _, perr := appParseLines(buf[:n], off > 0); perr != nil {
							mu.Lock()
							bad = append(bad, badTail{fmt.Sprintf("seek-to-end read of %s (size %d, %d bytes read)", p, st.Size(), n), off, buf[:n], perr})
							mu.Unlock()
						}
					}
				}
				f.Close()
				if err != nil {
					errs <- fmt.Errorf("seek-to-end read of %s: %v", p, err)
					return
				}
				mu.Lock()
				tails++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	stop.Store(true)
	rwg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}
	cl := c.Client(client.Config{NoShortCircuit: true})
	defer cl.Close()
	viaMount, err := os.ReadFile(path)
	testkit.MustOK(t, "read through the mount", err)
	viaClient, err := appRead(ctx, cl, "/log")
	testkit.MustOK(t, "read through the client", err)
	if !bytes.Equal(viaMount, viaClient) {
		t.Fatalf("the mount and the client read the log differently: %s", appDiff(viaMount, viaClient))
	}
	if !bytes.HasPrefix(viaClient, base) {
		t.Fatalf("the log lost its first bytes: %s", appDiff(viaClient[:min(len(viaClient), len(base))], base))
	}
	ids, err := appParseLines(viaClient[len(base):], false)
	if err != nil {
		t.Fatalf("the log: %v", err)
	}
	partial := 0
	for _, b := range bad {
		off := b.off
		if off < 0 {
			off = int64(bytes.Index(viaClient, b.data))
		}
		switch {
		case off >= 0 && off+int64(len(b.data)) <= int64(len(viaClient)) && bytes.Equal(viaClient[off:off+int64(len(b.data))], b.data):
			// A committed version that ends inside a line: a close (FLUSH)
			// of another descriptor committed while a write(2) was still
			// arriving in pieces. Not about extension; logged.
			partial++
		case off >= 0:
			t.Errorf("%s: %v; at %d the final file differs: %s", b.how, b.err, off, appDiff(b.data, viaClient[off:min(int64(len(viaClient)), off+int64(len(b.data)))]))
		default:
			t.Errorf("%s: %v; these bytes are nowhere in the final file", b.how, b.err)
		}
	}
	count := map[appID]int{}
	for _, id := range ids {
		count[id]++
	}
	for id, n := range count {
		if n > 1 {
			t.Errorf("line %v is there %d times", id, n)
		}
	}
	for id := range acked {
		if count[id] != 1 {
			t.Errorf("fsynced line %v is there %d times", id, count[id])
		}
	}
	t.Logf("%d lines, %d fsynced, %d tail reads, %d of them ending inside a line (a prefix of the final file)", len(ids), len(acked), tails, partial)
	if p := fsckProblems(t, cl); len(p) > 0 {
		t.Fatalf("fsck: %q", p)
	}
}

// TestExtensionFUSEWriterMountReadsWrongBytes: one process appends lines
// with O_APPEND through a FUSE mount (each line fsynced and closed) while
// another reads the file's tail through the same mount. Every tail read
// must be the bytes the file holds at that offset at the end (the file
// only grows by appends, so every state is a prefix of the last), and the
// size a stat shows must never go back.
//
// Failed before 5efad75, also before extension in place (6a2f11d): a stat
// racing a commit cached the size from before it, the file seemed to
// shrink, and tail reads returned bytes the file never held there.
func TestExtensionFUSEWriterMountReadsWrongBytes(t *testing.T) {
	testkit.NeedFUSE(t)
	c := clustertest.Start(t, clustertest.Options{})
	m := testkit.StartMount(t, c)
	path := m.Path("log")
	testkit.MustOK(t, "create", os.WriteFile(path, appLine(9, 0, 100), 0o644))
	type read struct {
		off  int64
		data []byte
	}
	var reads []read
	done := make(chan error, 1)
	go func() {
		for seq := 0; seq < 120; seq++ {
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				done <- err
				return
			}
			_, err = f.Write(appLine(1, seq, 1+(seq*733)%9000))
			if err == nil {
				err = f.Sync()
			}
			f.Close()
			if err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	var werr error
	var lastSize int64
	shrank := 0
	for running := true; running; {
		select {
		case werr = <-done:
			running = false
		default:
		}
		f, err := os.Open(path)
		testkit.MustOK(t, "open", err)
		st, err := f.Stat()
		testkit.MustOK(t, "stat", err)
		if st.Size() < lastSize {
			if shrank == 0 {
				t.Logf("the size of the append-only file went back from %d to %d", lastSize, st.Size())
			}
			shrank++
		}
		lastSize = st.Size()
		off := max(0, st.Size()-3000)
		buf := make([]byte, st.Size()-off)
		n, err := f.ReadAt(buf, off)
		f.Close()
		if err != nil && err != io.EOF {
			t.Fatal(err)
		}
		reads = append(reads, read{off, buf[:n]})
	}
	testkit.MustOK(t, "append", werr)
	final, err := os.ReadFile(path)
	testkit.MustOK(t, "read", err)
	if _, err := appParseLines(final, false); err != nil {
		t.Fatalf("the file: %v", err)
	}
	wrong := 0
	for _, r := range reads {
		end := r.off + int64(len(r.data))
		if end > int64(len(final)) || !bytes.Equal(final[r.off:end], r.data) {
			if wrong < 3 {
				t.Errorf("a read of %d bytes at %d returned bytes the file never held there: %s", len(r.data), r.off, appDiff(r.data, final[r.off:min(end, int64(len(final)))]))
			}
			wrong++
		}
	}
	if wrong > 0 || shrank > 0 {
		t.Errorf("%d of %d tail reads were wrong; the size seen went back %d times", wrong, len(reads), shrank)
	}
}
