package mount

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestMountWaitsOutNamenodeRestart (issue 19 item 7): the namenode is
// killed (SIGKILL) and restarted at once, as the supervisor of 'cluster
// up' does, while programs use the mount in a loop: touch, cat, stat, a
// read of a file that stays open across the restart, and write + close of
// new files. Every operation waits for the namenode and succeeds with the
// right content; none fails with EIO. Several restarts in a row.
func TestMountWaitsOutNamenodeRestart(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	m := testkit.StartMount(t, c)

	catData := testkit.SeededBytes(150000, 71) // three 64 KiB blocks
	testkit.MustOK(t, "write cat file", os.WriteFile(m.Path("cat"), catData, 0o644))
	heldData := testkit.SeededBytes(200000, 72)
	testkit.MustOK(t, "write held file", os.WriteFile(m.Path("held"), heldData, 0o644))
	// O_DIRECT: its reads reach the mount, not the page cache.
	held, err := os.OpenFile(m.Path("held"), os.O_RDONLY|syscall.O_DIRECT, 0)
	testkit.MustOK(t, "open held file", err)
	defer func() { held.Close() }()

	rwData := testkit.SeededBytes(300000, 73)
	testkit.MustOK(t, "write rw file", os.WriteFile(m.Path("rw"), rwData, 0o644))
	rw := startHolder(t, m.Path("rw"))
	src := filepath.Join(t.TempDir(), "src")
	var created atomic.Int64
	type worker struct {
		name string
		op   func(i int) error
	}
	workers := []worker{
		{"touch", func(i int) error {
			// A new name (a create) and an existing one (a utimes).
			if err := runProgram("touch", m.Path(fmt.Sprintf("new-%d", created.Add(1)))); err != nil {
				return err
			}
			return runProgram("touch", m.Path(fmt.Sprintf("touched-%d", i%8)))
		}},
		{"cat", func(i int) error {
			out, err := exec.Command("cat", m.Path("cat")).Output()
			if err != nil {
				return fmt.Errorf("cat: %v", exitDetail(err))
			}
			if !bytes.Equal(out, catData) {
				return fmt.Errorf("cat read %d bytes, not the %d written", len(out), len(catData))
			}
			return nil
		}},
		{"stat", func(i int) error {
			var st syscall.Stat_t
			if err := syscall.Stat(m.Path("cat"), &st); err != nil {
				return err
			}
			if st.Size != int64(len(catData)) {
				return fmt.Errorf("size %d, want %d", st.Size, len(catData))
			}
			return nil
		}},
		{"read of an open file", func(i int) error {
			if i%10 == 9 {
				// Opened again: its first read begins a transaction.
				held.Close()
				f, err := os.OpenFile(m.Path("held"), os.O_RDONLY|syscall.O_DIRECT, 0)
				if err != nil {
					return err
				}
				held = f
			}
			off := int64(i*40009) % int64(len(heldData)-4096)
			b := make([]byte, 4096)
			n, err := held.ReadAt(b, off)
			if err != nil {
				return err
			}
			if !bytes.Equal(b[:n], heldData[off:off+4096]) {
				return fmt.Errorf("pread at %d returned other bytes", off)
			}
			return nil
		}},
		{"write and read of a file open for writing", func(i int) error {
			off := (i * 7919) % (len(rwData) - 3000)
			p := testkit.SeededBytes(3000, uint64(5000+i))
			if err := rw.write(off, p); err != nil {
				return err
			}
			copy(rwData[off:], p)
			at := (off + 50000) % (len(rwData) - 8192)
			return rw.check(at, rwData[at:at+8192])
		}},
		{"write and close", func(i int) error {
			// cp writes and closes: a file open for writing in this test
			// process would be closed (and its data committed) by the exec
			// that restarts the namenode, which then waits for it.
			name := m.Path(fmt.Sprintf("written-%d", i%4))
			data := testkit.SeededBytes(70000+i, uint64(1000+i))
			if err := os.WriteFile(src, data, 0o644); err != nil {
				return err
			}
			if err := runProgram("cp", src, name); err != nil {
				return err
			}
			got, err := os.ReadFile(name)
			if err != nil {
				return fmt.Errorf("read back: %w", err)
			}
			if !bytes.Equal(got, data) {
				return fmt.Errorf("read back %d bytes, not the %d written", len(got), len(data))
			}
			return nil
		}},
	}

	const restarts = 4
	for round := 0; round < restarts; round++ {
		var stop atomic.Bool
		done := make([]atomic.Int64, len(workers))
		errs := make(chan error, len(workers))
		var wg sync.WaitGroup
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; !stop.Load(); i++ {
					if err := workers[w].op(i); err != nil {
						errs <- fmt.Errorf("restart %d: %s (operation %d): %w", round+1, workers[w].name, i, err)
						return
					}
					done[w].Add(1)
				}
			}()
		}
		// Every worker is under way before the kill, and completes
		// operations after the new namenode is up.
		waitOps := func(min []int64) {
			deadline := time.Now().Add(2 * time.Minute)
			for w := range workers {
				for done[w].Load() < min[w] {
					if len(errs) > 0 || time.Now().After(deadline) {
						return
					}
					time.Sleep(5 * time.Millisecond) // polling a condition
				}
			}
		}
		atKill := make([]int64, len(workers))
		for w := range workers {
			atKill[w] = done[w].Load() + 1
		}
		waitOps(atKill)
		c.Kill(c.NN)
		c.StartNamenode()
		after := make([]int64, len(workers))
		for w := range workers {
			after[w] = done[w].Load() + 3
		}
		waitOps(after)
		stop.Store(true)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		if t.Failed() {
			t.FailNow()
		}
		for w := range workers {
			if done[w].Load() < after[w] {
				t.Fatalf("restart %d: %s made no progress after the restart", round+1, workers[w].name)
			}
		}
	}
	// The writes through the file kept open are all there once it closes.
	testkit.MustOK(t, "close the file open for writing", rw.close())
	got, err := os.ReadFile(m.Path("rw"))
	testkit.MustOK(t, "read rw file", err)
	if !bytes.Equal(got, rwData) {
		t.Fatalf("the file written while open across the restarts: %s", describeDiff(got, rwData))
	}
}

// holder is a child process holding a file of the mount open for reading
// and writing, which the test has write and read. The test process itself
// must not have a file of the mount open for writing while it restarts
// the namenode: the exec closes the descriptor in the new process, and
// that close commits the file's writes, waiting for the namenode it is
// starting.
type holder struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
}

func startHolder(t *testing.T, path string) *holder {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run", "^TestOpenFileHolder$", "-test.count=1")
	cmd.Env = append(os.Environ(), "PLASMA_TEST_HOLD="+path)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	testkit.MustOK(t, "holder stdin", err)
	out, err := cmd.StdoutPipe()
	testkit.MustOK(t, "holder stdout", err)
	testkit.MustOK(t, "start holder", cmd.Start())
	h := &holder{cmd: cmd, in: in, out: bufio.NewScanner(out)}
	t.Cleanup(func() { h.in.Close(); h.cmd.Process.Kill(); h.cmd.Wait() })
	if err := h.ask("ping"); err != nil {
		t.Fatalf("holder: %v", err)
	}
	return h
}

// ask sends one request and waits for its answer ("ok" or an error).
func (h *holder) ask(req string) error {
	if _, err := fmt.Fprintln(h.in, req); err != nil {
		return err
	}
	for h.out.Scan() {
		line := h.out.Text()
		if line == "ok" {
			return nil
		}
		if msg, ok := strings.CutPrefix(line, "error "); ok {
			return errors.New(msg)
		}
	}
	return fmt.Errorf("holder process ended: %v", h.out.Err())
}

func (h *holder) write(off int, p []byte) error {
	return h.ask(fmt.Sprintf("write %d %x", off, p))
}

func (h *holder) check(off int, want []byte) error {
	return h.ask(fmt.Sprintf("check %d %x", off, want))
}

func (h *holder) close() error { return h.ask("close") }

// TestOpenFileHolder is the holder process of TestMountWaitsOutNamenodeRestart
// (with PLASMA_TEST_HOLD set); on its own it does nothing. It opens the
// file, then serves requests from stdin: "write OFF HEX" (pwrite), "check
// OFF HEX" (pread, compared), "close", "ping"; each is answered "ok" or
// "error MESSAGE".
func TestOpenFileHolder(t *testing.T) {
	path := os.Getenv("PLASMA_TEST_HOLD")
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(nil, 1<<20)
	for in.Scan() {
		var err error
		switch op := strings.Fields(in.Text()); {
		case len(op) == 1 && op[0] == "ping":
		case len(op) == 1 && op[0] == "close":
			err = f.Close()
		case len(op) == 3 && (op[0] == "write" || op[0] == "check"):
			off, _ := strconv.ParseInt(op[1], 10, 64)
			p, _ := hex.DecodeString(op[2])
			if op[0] == "write" {
				_, err = f.WriteAt(p, off)
				break
			}
			got := make([]byte, len(p))
			if _, err = f.ReadAt(got, off); err == nil && !bytes.Equal(got, p) {
				err = fmt.Errorf("pread at %d: %s", off, describeDiff(got, p))
			}
		default:
			err = fmt.Errorf("bad request %q", in.Text())
		}
		if err != nil {
			fmt.Printf("error %v\n", err)
		} else {
			fmt.Println("ok")
		}
	}
}

// runProgram runs a program and reports its failure with its stderr.
func runProgram(name string, args ...string) error {
	if _, err := exec.Command(name, args...).Output(); err != nil {
		return fmt.Errorf("%s: %v", name, exitDetail(err))
	}
	return nil
}

// exitDetail adds a failed program's stderr to its error.
func exitDetail(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return fmt.Sprintf("%v: %s", err, bytes.TrimSpace(ee.Stderr))
	}
	return err.Error()
}
