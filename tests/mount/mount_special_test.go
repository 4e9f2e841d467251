package mount

import (
	"context"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestMountSpecialFiles: FIFOs, sockets and device nodes made through the
// mount have their type, mode and device number, a FIFO carries data
// between two local processes (the kernel's pipe), and all of it is still
// there after the namenode restarts.
func TestMountSpecialFiles(t *testing.T) {
	testkit.NeedFUSE(t)
	c := clustertest.Start(t, clustertest.Options{})
	m := testkit.StartMount(t, c, "ttl=0")
	fifo, cdev, bdev, sock := m.Path("fifo"), m.Path("cdev"), m.Path("bdev"), m.Path("sock")
	testkit.MustOK(t, "mkfifo", syscall.Mkfifo(fifo, 0o640))
	testkit.MustOK(t, "mknod c", syscall.Mknod(cdev, syscall.S_IFCHR|0o600, int(unix.Mkdev(1, 3))))
	testkit.MustOK(t, "mknod b", syscall.Mknod(bdev, syscall.S_IFBLK|0o600, int(unix.Mkdev(7, 42))))
	l, err := net.Listen("unix", sock)
	testkit.MustOK(t, "bind a socket", err)
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()

	check := func(when string) {
		t.Helper()
		for _, x := range []struct {
			p    string
			mode uint32
			rdev uint64
		}{{fifo, syscall.S_IFIFO | 0o640, 0}, {cdev, syscall.S_IFCHR | 0o600, unix.Mkdev(1, 3)},
			{bdev, syscall.S_IFBLK | 0o600, unix.Mkdev(7, 42)}} {
			var st syscall.Stat_t
			testkit.MustOK(t, "lstat", syscall.Lstat(x.p, &st))
			if st.Mode != x.mode || st.Rdev != x.rdev {
				t.Errorf("%s: %s has mode %o rdev %d, want %o and %d", when, x.p, st.Mode, st.Rdev, x.mode, x.rdev)
			}
		}
		var st syscall.Stat_t
		testkit.MustOK(t, "lstat", syscall.Lstat(sock, &st))
		if st.Mode&syscall.S_IFMT != syscall.S_IFSOCK {
			t.Errorf("%s: the socket has mode %o", when, st.Mode)
		}
	}
	check("after mknod")

	// A FIFO in the mount is a pipe between local processes.
	done := make(chan error, 1)
	go func() {
		w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err == nil {
			_, err = w.Write([]byte("through the fifo"))
			w.Close()
		}
		done <- err
	}()
	r, err := os.Open(fifo)
	testkit.MustOK(t, "open fifo", err)
	got, err := io.ReadAll(r)
	r.Close()
	testkit.MustOK(t, "read fifo", err)
	testkit.MustOK(t, "write fifo", <-done)
	if string(got) != "through the fifo" {
		t.Fatalf("read %q from the fifo", got)
	}

	// The client library sees the types, and they survive a restart.
	c.Kill(c.NN)
	c.StartNamenode()
	c.WaitLive(2)
	cl := c.Client(client.Config{})
	defer cl.Close()
	ctx := context.Background()
	tx := cl.Begin()
	defer tx.Abort(ctx)
	for name, want := range map[string]client.FileType{"/fifo": client.TypeFIFO, "/cdev": client.TypeCharDevice, "/bdev": client.TypeBlockDevice, "/sock": client.TypeSocket} {
		fi, err := tx.Lookup(ctx, name)
		testkit.MustOK(t, "lookup "+name, err)
		if fi.Type != want {
			t.Errorf("%s: type %v after a namenode restart, want %v", name, fi.Type, want)
		}
		if name == "/bdev" && fi.Rdev != unix.Mkdev(7, 42) {
			t.Errorf("/bdev: rdev %d after a namenode restart", fi.Rdev)
		}
	}
	check("after a namenode restart")
	if out := c.MustRun("ls", "-l", "/"); !containsAll(out, "prw-r-----", "crw-------", "brw-------", "srw") {
		t.Errorf("plasma ls -l does not show the types:\n%s", out)
	}
}

func containsAll(s string, subs ...string) bool {
	for _, x := range subs {
		if !strings.Contains(s, x) {
			return false
		}
	}
	return true
}
