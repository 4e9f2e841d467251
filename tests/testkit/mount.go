package testkit

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/plasmafs/plasma/internal/clustertest"
)

// Mount is a 'plasma mount' process serving a mountpoint.
type Mount struct {
	t    *testing.T
	Dir  string
	cmd  *exec.Cmd
	done chan struct{}
	log  *strings.Builder
	// stderr is what the mount process has written to its standard
	// error (also passed on to the test's).
	stderr lockedBuffer
}

// NeedFUSE skips the test where FUSE mounts cannot be made (not root, no
// /dev/fuse). CI runs as root.
func NeedFUSE(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("FUSE mounts need root")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skip("no /dev/fuse")
	}
}

// StartMount mounts the cluster on a new directory with 'plasma mount'
// (in the foreground, as a child process) and returns once the mount is
// ready. Teardown unmounts it whatever happened.
func StartMount(t *testing.T, c *clustertest.Procs, opts ...string) *Mount {
	t.Helper()
	return StartMountFlags(t, c, nil, opts...)
}

// StartMountFlags is StartMount with more flags for 'plasma mount'
// (-admin-listen ADDR, say).
func StartMountFlags(t *testing.T, c *clustertest.Procs, flags []string, opts ...string) *Mount {
	t.Helper()
	return startMount(t, c.Bin, c.Env(), flags, opts...)
}

// StartMountWith is StartMount for any cluster: bin is the plasma binary,
// env the mount's environment (which names the cluster).
func StartMountWith(t *testing.T, bin string, env []string, opts ...string) *Mount {
	t.Helper()
	return startMount(t, bin, env, nil, opts...)
}

func startMount(t *testing.T, bin string, env []string, flags []string, opts ...string) *Mount {
	t.Helper()
	NeedFUSE(t)
	dir := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	m := &Mount{t: t, Dir: dir, done: make(chan struct{}), log: &strings.Builder{}}
	args := append(append([]string{"mount"}, flags...), dir)
	if len(opts) > 0 {
		args = append(args, "-o", strings.Join(opts, ","))
	}
	m.cmd = exec.Command(bin, args...)
	m.cmd.Env = env
	m.cmd.Stderr = io.MultiWriter(os.Stderr, &m.stderr)
	out, err := m.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := m.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.teardown)
	sc := bufio.NewScanner(out)
	ready := false
	for sc.Scan() {
		m.log.WriteString(sc.Text() + "\n")
		if strings.HasPrefix(sc.Text(), "plasma: mounted ") {
			ready = true
			break
		}
	}
	go func() {
		for sc.Scan() {
		}
		m.cmd.Wait()
		close(m.done)
	}()
	if !ready {
		<-m.done
		t.Fatalf("plasma mount did not mount (exit %d): %s", m.cmd.ProcessState.ExitCode(), m.log)
	}
	return m
}

// Stderr returns what the mount process has written to its standard
// error so far: its log.
func (m *Mount) Stderr() string { return m.stderr.String() }

// lockedBuffer is a bytes.Buffer written by the process's output copier
// while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Path returns the path of name inside the mount.
func (m *Mount) Path(name string) string { return filepath.Join(m.Dir, name) }

// Running reports whether the mount process is running.
func (m *Mount) Running() bool {
	select {
	case <-m.done:
		return false
	default:
		return true
	}
}

// Wait waits for the mount process to exit and returns its exit code.
func (m *Mount) Wait() int {
	<-m.done
	return m.cmd.ProcessState.ExitCode()
}

// Signal sends sig to the mount process.
func (m *Mount) Signal(sig syscall.Signal) { m.cmd.Process.Signal(sig) }

func (m *Mount) teardown() {
	if m.Running() {
		m.cmd.Process.Signal(syscall.SIGTERM)
		<-m.done
	}
	if IsMounted(m.Dir) {
		syscall.Unmount(m.Dir, syscall.MNT_DETACH)
	}
}

// IsMounted reports whether dir is a mountpoint (per /proc/self/mountinfo).
func IsMounted(dir string) bool {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) > 4 && UnescapeMountPath(f[4]) == dir {
			return true
		}
	}
	return false
}

// UnescapeMountPath undoes the octal escapes of a path in /proc/mounts.
func UnescapeMountPath(s string) string {
	r := strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`)
	return r.Replace(s)
}
