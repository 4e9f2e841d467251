package mount

import (
	"bytes"
	"os"
	"testing"
	"time"

	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestReopenReadsOtherClientsBytes: a file this mount has read (its pages
// in the kernel's cache, its attributes cached for an hour) is overwritten
// in place by another client (a second mount; same size). Opened again
// here, it reads the new bytes (close-to-open consistency): the mount
// drops the kernel's pages of a file at an open, as the kernel did itself
// before the mount kept them (FOPEN_KEEP_CACHE), since no new size or
// mtime reaches the kernel while its attributes are fresh.
func TestReopenReadsOtherClientsBytes(t *testing.T) {
	testkit.NeedFUSE(t)
	c := clustertest.Start(t, clustertest.Options{})
	m := testkit.StartMount(t, c, "ttl=1h")
	other := testkit.StartMount(t, c)
	old, overwrite := bytes.Repeat([]byte("a"), 3*4096+100), bytes.Repeat([]byte("b"), 3*4096+100)
	testkit.MustOK(t, "write", os.WriteFile(m.Path("f"), old, 0o644))
	got, err := os.ReadFile(m.Path("f"))
	testkit.MustOK(t, "read", err)
	if !bytes.Equal(got, old) {
		t.Fatalf("read %q… after writing %q…", got[:8], old[:8])
	}
	testkit.AwaitCond(t, 10*time.Second, "the second mount sees the file", func() bool {
		st, err := os.Stat(other.Path("f"))
		return err == nil && st.Size() == int64(len(old))
	})
	f, err := os.OpenFile(other.Path("f"), os.O_WRONLY, 0)
	testkit.MustOK(t, "open in the second mount", err)
	_, err = f.WriteAt(overwrite, 0)
	testkit.MustOK(t, "overwrite in the second mount", err)
	testkit.MustOK(t, "close in the second mount", f.Close())
	got, err = os.ReadFile(m.Path("f"))
	testkit.MustOK(t, "read again", err)
	if !bytes.Equal(got, overwrite) {
		t.Fatalf("opened again after another client overwrote it, the file reads %d bytes 'a' of %d", bytes.Count(got, []byte("a")), len(got))
	}
}
