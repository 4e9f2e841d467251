package mount

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// ctimeOf returns the status-change time of p (lstat).
func ctimeOf(t *testing.T, p string) time.Time {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Lstat(p, &st); err != nil {
		t.Fatal(err)
	}
	return time.Unix(st.Ctim.Sec, st.Ctim.Nsec)
}

// TestMountCtime: the changes POSIX says move a ctime move it through the
// mount (the cases pjdfstest found unmoved): entries added to and removed
// from a directory, a truncate of an open file, and a rename over a file
// that keeps another name.
func TestMountCtime(t *testing.T) {
	testkit.NeedFUSE(t)
	c := clustertest.Start(t, clustertest.Options{})
	m := testkit.StartMount(t, c, "ttl=0")
	d := m.Path("d")
	testkit.MustOK(t, "mkdir", os.Mkdir(d, 0o755))
	testkit.MustOK(t, "create", os.WriteFile(filepath.Join(d, "f"), []byte("x"), 0o644))

	changed := func(what, p string, fn func()) {
		t.Helper()
		before := ctimeOf(t, p)
		// The namenode's clock must move past before: wait until a new
		// file's ctime is later (no fixed sleep).
		for probe := 0; ; probe++ {
			q := m.Path("probe")
			testkit.MustOK(t, "probe", os.WriteFile(q, nil, 0o644))
			late := ctimeOf(t, q).After(before)
			os.Remove(q)
			if late {
				break
			}
		}
		fn()
		if after := ctimeOf(t, p); !after.After(before) {
			t.Errorf("%s: ctime of %s stayed %v", what, filepath.Base(p), before)
		}
	}
	changed("unlink in the directory", d, func() { testkit.MustOK(t, "unlink", os.Remove(filepath.Join(d, "f"))) })
	changed("mkdir in the directory", d, func() { testkit.MustOK(t, "mkdir", os.Mkdir(filepath.Join(d, "sub"), 0o755)) })
	changed("rmdir in the directory", d, func() { testkit.MustOK(t, "rmdir", os.Remove(filepath.Join(d, "sub"))) })

	f := m.Path("open")
	fd, err := os.OpenFile(f, os.O_RDWR|os.O_CREATE, 0o644)
	testkit.MustOK(t, "open", err)
	defer fd.Close()
	changed("ftruncate of an open file", f, func() { testkit.MustOK(t, "ftruncate", fd.Truncate(123)) })

	src, dst, other := m.Path("src"), m.Path("dst"), m.Path("dst-link")
	testkit.MustOK(t, "create", os.WriteFile(src, []byte("s"), 0o644))
	testkit.MustOK(t, "create", os.WriteFile(dst, []byte("d"), 0o644))
	testkit.MustOK(t, "link", os.Link(dst, other))
	changed("rename over a file with another name", other, func() { testkit.MustOK(t, "rename", os.Rename(src, dst)) })
}
