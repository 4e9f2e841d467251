package cli

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestGetWritesIntoSpecialFiles: 'plasma get' and 'plasma cp' to a local
// path that is a FIFO or a device write into it, as cat would, instead of
// renaming a temporary file over it ('plasma get /f /dev/null' run as root
// used to leave a plain file in place of /dev/null).
func TestGetWritesIntoSpecialFiles(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Datanodes: 1, Size: 16 << 20})
	tmp := t.TempDir()
	data := testkit.RandomBytes(t, 300<<10)
	src := filepath.Join(tmp, "src")
	if err := os.WriteFile(src, data, 0o644); err != nil {
		t.Fatal(err)
	}
	c.MustRun("put", src, "/f")

	for _, args := range [][]string{{"get", "/f"}, {"cp", "/f"}} {
		fifo := filepath.Join(tmp, "fifo-"+args[0])
		if err := unix.Mkfifo(fifo, 0o600); err != nil {
			t.Fatal(err)
		}
		// A second name for the FIFO: if the command replaced the first,
		// opening this one for writing releases the reader below.
		spare := fifo + ".spare"
		if err := os.Link(fifo, spare); err != nil {
			t.Fatal(err)
		}
		release := func() {
			if f, err := os.OpenFile(spare, os.O_WRONLY|unix.O_NONBLOCK, 0); err == nil {
				f.Close()
			}
		}
		got := make(chan []byte, 1)
		go func() {
			f, err := os.Open(fifo) // blocks until the writer opens it
			if err != nil {
				got <- nil
				return
			}
			b, _ := io.ReadAll(f)
			f.Close()
			got <- b
		}()
		dst := fifo
		if args[0] == "cp" {
			dst = "file::" + fifo
		}
		out, code := c.Run(nil, append(args, dst)...)
		if fi, err := os.Lstat(fifo); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
			release()
			<-got
			t.Fatalf("plasma %s into a FIFO: %s is no longer a FIFO (%v, %v)", args[0], fifo, fi.Mode(), err)
		}
		if code != 0 {
			release()
			<-got
			t.Fatalf("plasma %s into a FIFO: exit %d\n%s", args[0], code, out)
		}
		if b := <-got; !bytes.Equal(b, data) {
			t.Errorf("plasma %s into a FIFO: the reader got %d bytes, want the file's %d", args[0], len(b), len(data))
		}
	}

	// A character device of its own, the null device's numbers.
	null := filepath.Join(tmp, "null")
	if err := unix.Mknod(null, unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
		t.Fatal(err)
	}
	c.MustRun("get", "/f", null)
	if fi, err := os.Lstat(null); err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		t.Errorf("plasma get into a character device replaced it: %v, %v", fi.Mode(), err)
	}
}
