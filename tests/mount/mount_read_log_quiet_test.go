package mount

import (
	"bytes"
	"io"
	"os"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestMountReadsLogNothing (issue 27 item 5): a large file read through
// the mount comes back whole (1 MiB READs, the mount's largest, and a
// tail shorter than a page), and reading writes nothing to the mount's
// log. go-fuse, asked to try splice, first tried a pipe for every READ
// reply and logged "trySplice: ... max pipe size" for each 1 MiB one; the
// mount answers from memory and turns splice off.
func TestMountReadsLogNothing(t *testing.T) {
	testkit.NeedFUSE(t)
	c := clustertest.Start(t, clustertest.Options{})
	m := testkit.StartMount(t, c)
	want := testkit.RandomBytes(t, 4<<20+1000)
	testkit.MustOK(t, "write", os.WriteFile(m.Path("big"), want, 0o644))
	logBefore := m.Stderr()
	for round := 0; round < 2; round++ {
		f, err := os.Open(m.Path("big"))
		testkit.MustOK(t, "open", err)
		// Drop what the kernel cached of the file: the bytes come
		// through the mount process.
		unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
		got := make([]byte, len(want)+1)
		n, err := readFull(f, got)
		f.Close()
		if err != nil || !bytes.Equal(got[:n], want) {
			t.Fatalf("round %d: read %d bytes through the mount (%v), want the %d written", round, n, err, len(want))
		}
	}
	if added := m.Stderr()[len(logBefore):]; added != "" {
		t.Errorf("reading through the mount wrote to its log:\n%s", firstLines(added, 5))
	}
}

// readFull reads f until EOF into p (with 1 MiB reads, as cp does).
func readFull(f *os.File, p []byte) (int, error) {
	n := 0
	for n < len(p) {
		k, err := f.Read(p[n:min(len(p), n+1<<20)])
		n += k
		if k == 0 || err != nil {
			if err == io.EOF {
				err = nil
			}
			return n, err
		}
	}
	return n, nil
}

// firstLines returns the first n lines of s.
func firstLines(s string, n int) string {
	lines := bytes.SplitAfterN([]byte(s), []byte("\n"), n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return string(bytes.Join(lines, nil))
}
