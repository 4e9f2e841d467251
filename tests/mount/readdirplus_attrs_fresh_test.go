package mount

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestReaddirPlusAttrsFresh: a file changed by the mount while a listing
// of its directory is half read reads as changed afterwards. The rest of
// the listing must not hand the kernel what the directory's entries were
// when the listing began: the kernel takes the attributes and inodes of
// READDIRPLUS replies as current, so an old size cuts every later read of
// the file short, and an old inode for a name that a rename replaced
// since makes the name read as the file it replaced (git's lock files:
// write X.lock, rename it over X).
func TestReaddirPlusAttrsFresh(t *testing.T) {
	testkit.NeedFUSE(t)
	c := clustertest.Start(t, clustertest.Options{})
	m := testkit.StartMount(t, c)

	t.Run("grown", func(t *testing.T) {
		want := testkit.SeededBytes(5000, 7)
		changeMidListing(t, m.Path("grown"), func(last string) {
			testkit.MustOK(t, "rewrite", os.WriteFile(last, want, 0o644))
		}, want)
	})
	t.Run("renamed-over", func(t *testing.T) {
		want := testkit.SeededBytes(3000, 8)
		changeMidListing(t, m.Path("renamed"), func(last string) {
			testkit.MustOK(t, "write lock file", os.WriteFile(last+".lock", want, 0o644))
			testkit.MustOK(t, "rename over", os.Rename(last+".lock", last))
		}, want)
	})
}

// changeMidListing fills dir with enough files that a listing takes
// several READDIRPLUS requests, reads the first part of a listing, lets
// change change the last file, reads the rest, and checks that the last
// file then stats and reads as want.
func changeMidListing(t *testing.T, dir string, change func(last string), want []byte) {
	testkit.MustOK(t, "mkdir", os.Mkdir(dir, 0o755))
	const files = 300
	for i := 0; i < files; i++ {
		testkit.MustOK(t, "write", os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%03d", i)), []byte("short one\n"), 0o644))
	}
	last := filepath.Join(dir, fmt.Sprintf("f%03d", files-1))

	fd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY, 0)
	testkit.MustOK(t, "open dir", err)
	defer syscall.Close(fd)
	buf := make([]byte, 512) // a small part of the listing
	n, err := syscall.Getdents(fd, buf)
	testkit.MustOK(t, "getdents", err)
	if n == 0 {
		t.Fatal("empty listing")
	}

	change(last)
	// A lookup in the directory, as ls -l makes between its reads: the
	// kernel goes on listing with attributes (READDIRPLUS).
	if _, err := os.Lstat(filepath.Join(dir, "no-such-name")); !os.IsNotExist(err) {
		t.Fatalf("lstat of a missing name: %v", err)
	}
	for {
		n, err := syscall.Getdents(fd, buf)
		testkit.MustOK(t, "getdents", err)
		if n == 0 {
			break
		}
	}

	st, err := os.Stat(last)
	testkit.MustOK(t, "stat", err)
	got, err := os.ReadFile(last)
	testkit.MustOK(t, "read", err)
	if st.Size() != int64(len(want)) || !bytes.Equal(got, want) {
		t.Fatalf("%s, changed while a listing was half read: stat size %d, read %d bytes (the new contents: %v); want %d bytes",
			last, st.Size(), len(got), bytes.Equal(got, want), len(want))
	}
}
