package tests

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/plasmafs/plasma/internal/clustertest"
)

// TestMountWaitsOutNamenodeRestart (issue 19 item 7): the namenode is
// killed (SIGKILL) and restarted at once, as the supervisor of 'cluster
// up' does, while programs use the mount in a loop: touch, cat, stat, a
// read of a file that stays open across the restart, and write + close of
// new files. Every operation waits for the namenode and succeeds with the
// right content; none fails with EIO. Several restarts in a row.
func TestMountWaitsOutNamenodeRestart(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	m := startMount(t, c)

	catData := randBytes(150000, 71) // three 64 KiB blocks
	mustOK(t, "write cat file", os.WriteFile(m.Path("cat"), catData, 0o644))
	heldData := randBytes(200000, 72)
	mustOK(t, "write held file", os.WriteFile(m.Path("held"), heldData, 0o644))
	held, err := os.Open(m.Path("held"))
	mustOK(t, "open held file", err)
	defer held.Close()

	src := filepath.Join(t.TempDir(), "src")
	type worker struct {
		name string
		op   func(i int) error
	}
	workers := []worker{
		{"touch", func(i int) error {
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
		{"write and close", func(i int) error {
			// cp writes and closes: a file open for writing in this test
			// process would be closed (and its data committed) by the exec
			// that restarts the namenode, which then waits for it.
			name := m.Path(fmt.Sprintf("written-%d", i%4))
			data := randBytes(70000+i, uint64(1000+i))
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
