package testkit

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clustertest"
)

// DatanodePid finds the process id of a running datanode by its volume
// directory on its command line.
func DatanodePid(t *testing.T, p *clustertest.Proc) int {
	t.Helper()
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, f := range procs {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if len(args) < 2 || args[1] != "datanode" {
			continue
		}
		for i := 0; i+1 < len(args); i++ {
			if args[i] == "-dir" && args[i+1] == p.Dir {
				pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(f)))
				return pid
			}
		}
	}
	t.Fatalf("no process for datanode %s", p.Dir)
	return 0
}

// ProcessRunning reports whether process pid runs; a zombie does not (members
// of a cluster whose supervisor was killed are reaped by init, maybe
// late).
func ProcessRunning(pid int) bool {
	if !ProcessAlive(pid) {
		return false
	}
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || b[i+2] != 'Z'
}

// ProcessAlive reports whether process pid exists (a zombie counts).
func ProcessAlive(pid int) bool { return pid > 0 && syscall.Kill(pid, 0) == nil }

// LineWatcher collects a process's output and lets a test wait for a line.
type LineWatcher struct {
	mu    sync.Mutex
	buf   strings.Builder
	added chan struct{}
}

// WatchOutput collects the lines read from r (a process's output) as they
// arrive, for WaitFor.
func WatchOutput(r io.Reader) *LineWatcher {
	w := &LineWatcher{added: make(chan struct{}, 1)}
	go func() {
		s := bufio.NewScanner(r)
		for s.Scan() {
			w.mu.Lock()
			w.buf.WriteString(s.Text() + "\n")
			w.mu.Unlock()
			select {
			case w.added <- struct{}{}:
			default:
			}
		}
	}()
	return w
}

func (w *LineWatcher) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// Added is signalled (without blocking the writer) whenever output arrives.
func (w *LineWatcher) Added() <-chan struct{} { return w.added }

// WaitFor waits until the output holds substr; it fails the test if
// the process exits (exited) first or after a deadline.
func (w *LineWatcher) WaitFor(t *testing.T, substr string, exited <-chan error) {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for !strings.Contains(w.String(), substr) {
		select {
		case <-w.added:
		case err := <-exited:
			t.Fatalf("cluster up exited (%v) before printing %q:\n%s", err, substr, w)
		case <-deadline:
			t.Fatalf("cluster up did not print %q within 60s:\n%s", substr, w)
		}
	}
}

// DatanodeIdentities maps the cluster's datanode addresses to their
// identities.
func DatanodeIdentities(t *testing.T, c *clustertest.Procs) map[string]string {
	t.Helper()
	cl := c.Client(client.Config{})
	defer cl.Close()
	ns, err := cl.Datanodes(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, n := range ns {
		m[n.Addr] = n.Identity
	}
	if len(m) != len(c.DNs) {
		t.Fatalf("datanodes %v", ns)
	}
	return m
}
