package posix

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"syscall"
	"testing"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clientx"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/internal/vfs"
	"github.com/plasmafs/plasma/tests/testkit"
)

// The POSIX conformance table: each case runs against every target (the
// FUSE mount, the client library, the NFS bridge through an NFS client)
// in a directory of its own. Paths are relative to the target's root,
// which is PlasmaFS directory plasmaRoot.

type pstat struct {
	size   int64
	nlink  uint32
	perm   uint32
	isDir  bool
	isLink bool
	mtime  time.Time
}

type readerAtCloser interface {
	io.ReaderAt
	io.Closer
}

type posixTarget interface {
	writeFile(p string, b []byte) error // create or truncate, write, close
	readFile(p string) ([]byte, error)
	mkdir(p string) error
	rename(from, to string, noReplace bool) error
	link(existing, p string) error
	symlink(target, p string) error
	readlink(p string) (string, error)
	stat(p string) (pstat, error) // does not follow a final symlink
	truncate(p string, size int64) error
	appendFile(p string, b []byte) error // open O_APPEND, write, close
	writeAt(p string, b []byte, off int64) error
	readDir(p string) ([]string, error)
	remove(p string) error
	rmdir(p string) error
	chmod(p string, perm uint32) error
	chtimes(p string, mtime time.Time) error
	openRead(p string) (readerAtCloser, error)
	// fsyncWrite writes b to new file p and makes it durable without
	// closing it; close closes it.
	fsyncWrite(p string, b []byte) (close func() error, err error)
}

// errnoOf maps any target's error to an errno.
func errnoOf(err error) syscall.Errno { return vfs.Errno(err) }

func wantErrno(t *testing.T, what string, err error, want syscall.Errno) {
	t.Helper()
	if got := errnoOf(err); got != want {
		t.Errorf("%s: error %v (%d), want %v", what, err, got, want)
	}
}

type posixCase struct {
	name string
	run  func(t *testing.T, x posixTarget, d string, env *posixEnv)
}

// posixEnv gives cases what lies outside the target: another client of
// the cluster, and where the target's root is in PlasmaFS.
type posixEnv struct {
	other      *client.Client
	plasmaRoot string
}

var posixCases = []posixCase{
	{"write-read", func(t *testing.T, x posixTarget, d string, env *posixEnv) {
		big := testkit.SeededBytes(1<<20+123, 1)
		testkit.MustOK(t, "write", x.writeFile(d+"/f", big))
		got, err := x.readFile(d + "/f")
		testkit.MustOK(t, "read", err)
		if !bytes.Equal(got, big) {
			t.Fatalf("read back %d bytes differing from the %d written", len(got), len(big))
		}
		testkit.MustOK(t, "rewrite shorter", x.writeFile(d+"/f", []byte("short")))
		if got, err := x.readFile(d + "/f"); err != nil || string(got) != "short" {
			t.Fatalf("after rewriting with %q: read %d bytes starting %q, %v", "short", len(got), got[:min(len(got), 8)], err)
		}
		if st, err := x.stat(d + "/f"); err != nil || st.size != 5 || st.isDir {
			t.Fatalf("stat: %+v %v", st, err)
		}
		wantErrno(t, "read missing", func() error { _, err := x.readFile(d + "/nope"); return err }(), syscall.ENOENT)
	}},
	{"random-sparse-write", func(t *testing.T, x posixTarget, d string, env *posixEnv) {
		data := testkit.SeededBytes(200000, 2)
		testkit.MustOK(t, "write", x.writeFile(d+"/f", data))
		testkit.MustOK(t, "patch", x.writeAt(d+"/f", []byte("XYZ"), 70000))
		copy(data[70000:], "XYZ")
		testkit.MustOK(t, "write past the end", x.writeAt(d+"/f", []byte("E"), 500000))
		data = append(data, make([]byte, 500001-len(data))...)
		data[500000] = 'E'
		got, err := x.readFile(d + "/f")
		testkit.MustOK(t, "read", err)
		if !bytes.Equal(got, data) {
			t.Fatalf("read back %d bytes, want %d (patched, hole of zeros, E)", len(got), len(data))
		}
	}},
	{"rename-over", func(t *testing.T, x posixTarget, d string, env *posixEnv) {
		testkit.MustOK(t, "write a", x.writeFile(d+"/a", []byte("A")))
		testkit.MustOK(t, "write b", x.writeFile(d+"/b", []byte("B")))
		testkit.MustOK(t, "rename a b", x.rename(d+"/a", d+"/b", false))
		if got, err := x.readFile(d + "/b"); err != nil || string(got) != "A" {
			t.Fatalf("b after rename over it: %q %v", got, err)
		}
		_, err := x.stat(d + "/a")
		wantErrno(t, "stat a after rename", err, syscall.ENOENT)
		testkit.MustOK(t, "write c", x.writeFile(d+"/c", []byte("C")))
		wantErrno(t, "rename no-replace over c", x.rename(d+"/b", d+"/c", true), syscall.EEXIST)
		if got, _ := x.readFile(d + "/c"); string(got) != "C" {
			t.Fatalf("c after refused rename: %q", got)
		}
		testkit.MustOK(t, "rename no-replace to a new name", x.rename(d+"/b", d+"/n", true))
	}},
	{"rename-dirs", func(t *testing.T, x posixTarget, d string, env *posixEnv) {
		testkit.MustOK(t, "mkdir", x.mkdir(d+"/p"))
		testkit.MustOK(t, "mkdir", x.mkdir(d+"/p/q"))
		wantErrno(t, "move a directory into itself", x.rename(d+"/p", d+"/p/q/r", false), syscall.EINVAL)
		testkit.MustOK(t, "mkdir", x.mkdir(d+"/full"))
		testkit.MustOK(t, "write", x.writeFile(d+"/full/f", nil))
		testkit.MustOK(t, "mkdir", x.mkdir(d+"/empty"))
		wantErrno(t, "rename over a non-empty directory", x.rename(d+"/empty", d+"/full", false), syscall.ENOTEMPTY)
		testkit.MustOK(t, "rename over an empty directory", x.rename(d+"/p", d+"/empty", false))
		if st, err := x.stat(d + "/empty/q"); err != nil || !st.isDir {
			t.Fatalf("moved subdirectory: %+v %v", st, err)
		}
		wantErrno(t, "rename a file over a directory", x.rename(d+"/full/f", d+"/empty", false), syscall.EISDIR)
	}},
	{"hard-links", func(t *testing.T, x posixTarget, d string, env *posixEnv) {
		testkit.MustOK(t, "write", x.writeFile(d+"/f", []byte("linked")))
		testkit.MustOK(t, "link", x.link(d+"/f", d+"/g"))
		if st, err := x.stat(d + "/f"); err != nil || st.nlink != 2 {
			t.Fatalf("nlink after link: %+v %v", st, err)
		}
		wantErrno(t, "link over an existing name", x.link(d+"/f", d+"/g"), syscall.EEXIST)
		testkit.MustOK(t, "remove f", x.remove(d+"/f"))
		if st, err := x.stat(d + "/g"); err != nil || st.nlink != 1 {
			t.Fatalf("nlink after unlink: %+v %v", st, err)
		}
		if got, err := x.readFile(d + "/g"); err != nil || string(got) != "linked" {
			t.Fatalf("g: %q %v", got, err)
		}
	}},
	{"symlinks", func(t *testing.T, x posixTarget, d string, env *posixEnv) {
		testkit.MustOK(t, "symlink", x.symlink("target/x", d+"/s"))
		if got, err := x.readlink(d + "/s"); err != nil || got != "target/x" {
			t.Fatalf("readlink: %q %v", got, err)
		}
		if st, err := x.stat(d + "/s"); err != nil || !st.isLink {
			t.Fatalf("lstat of a symlink: %+v %v", st, err)
		}
		wantErrno(t, "symlink over an existing name", x.symlink("y", d+"/s"), syscall.EEXIST)
	}},
	{"truncate", func(t *testing.T, x posixTarget, d string, env *posixEnv) {
		data := testkit.SeededBytes(100000, 3)
		testkit.MustOK(t, "write", x.writeFile(d+"/f", data))
		testkit.MustOK(t, "truncate down", x.truncate(d+"/f", 1000))
		if got, err := x.readFile(d + "/f"); err != nil || !bytes.Equal(got, data[:1000]) {
			t.Fatalf("after truncating to 1000: %d bytes, %v", len(got), err)
		}
		testkit.MustOK(t, "extend", x.truncate(d+"/f", 70000))
		got, err := x.readFile(d + "/f")
		testkit.MustOK(t, "read", err)
		want := append(append([]byte(nil), data[:1000]...), make([]byte, 69000)...)
		if !bytes.Equal(got, want) {
			t.Fatalf("after extending to 70000: %d bytes, the extension must read as zeros", len(got))
		}
	}},
	{"append", func(t *testing.T, x posixTarget, d string, env *posixEnv) {
		testkit.MustOK(t, "write", x.writeFile(d+"/f", []byte("a")))
		testkit.MustOK(t, "append", x.appendFile(d+"/f", []byte("bc")))
		testkit.MustOK(t, "append", x.appendFile(d+"/f", []byte("d")))
		if got, err := x.readFile(d + "/f"); err != nil || string(got) != "abcd" {
			t.Fatalf("after appends: %q %v", got, err)
		}
	}},
	{"readdir-1000", func(t *testing.T, x posixTarget, d string, env *posixEnv) {
		var want []string
		for i := 0; i < 1000; i++ {
			n := fmt.Sprintf("entry-%04d", i)
			want = append(want, n)
			testkit.MustOK(t, "create", x.writeFile(d+"/"+n, nil))
		}
		got, err := x.readDir(d)
		testkit.MustOK(t, "readdir", err)
		sort.Strings(got)
		if !slices.Equal(got, want) {
			t.Fatalf("readdir: %d entries, want 1000 (first %v)", len(got), got[:min(3, len(got))])
		}
	}},
	{"unlink-while-open", func(t *testing.T, x posixTarget, d string, env *posixEnv) {
		data := testkit.SeededBytes(150000, 4)
		testkit.MustOK(t, "write", x.writeFile(d+"/f", data))
		r, err := x.openRead(d + "/f")
		testkit.MustOK(t, "open", err)
		defer r.Close()
		testkit.MustOK(t, "unlink", x.remove(d+"/f"))
		_, err = x.stat(d + "/f")
		wantErrno(t, "stat after unlink", err, syscall.ENOENT)
		got := make([]byte, len(data))
		if n, err := r.ReadAt(got, 0); n != len(data) || (err != nil && err != io.EOF) || !bytes.Equal(got, data) {
			t.Fatalf("reading the unlinked file through its open descriptor: %d bytes, %v", n, err)
		}
	}},
	{"fsync-visible-to-another-client", func(t *testing.T, x posixTarget, d string, env *posixEnv) {
		data := testkit.SeededBytes(100000, 5)
		closeF, err := x.fsyncWrite(d+"/f", data)
		testkit.MustOK(t, "write and fsync", err)
		defer closeF()
		ctx := context.Background()
		var got []byte
		err = env.other.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
			f, err := tx.Open(ctx, path.Join(env.plasmaRoot, d, "f"))
			if err != nil {
				return err
			}
			got, err = io.ReadAll(f)
			return err
		})
		testkit.MustOK(t, "another client reads", err)
		if !bytes.Equal(got, data) {
			t.Fatalf("another client read %d bytes after fsync, want the %d written", len(got), len(data))
		}
	}},
	{"chmod-utimes", func(t *testing.T, x posixTarget, d string, env *posixEnv) {
		testkit.MustOK(t, "write", x.writeFile(d+"/f", []byte("x")))
		testkit.MustOK(t, "chmod", x.chmod(d+"/f", 0o600))
		mt := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
		testkit.MustOK(t, "utimes", x.chtimes(d+"/f", mt))
		st, err := x.stat(d + "/f")
		testkit.MustOK(t, "stat", err)
		if st.perm != 0o600 || !st.mtime.Equal(mt) {
			t.Fatalf("after chmod 0600 and utimes %v: mode %o mtime %v", mt, st.perm, st.mtime)
		}
	}},
	{"chmod-sticky-dir", func(t *testing.T, x posixTarget, d string, env *posixEnv) {
		testkit.MustOK(t, "mkdir", x.mkdir(d+"/sub"))
		testkit.MustOK(t, "chmod dir", x.chmod(d+"/sub", 0o1777))
		if st, err := x.stat(d + "/sub"); err != nil || st.perm != 0o1777 || !st.isDir {
			t.Fatalf("sticky directory: mode %o %v", st.perm, err)
		}
	}},
	{"mkdir-rmdir", func(t *testing.T, x posixTarget, d string, env *posixEnv) {
		testkit.MustOK(t, "mkdir", x.mkdir(d+"/d"))
		wantErrno(t, "mkdir over an existing name", x.mkdir(d+"/d"), syscall.EEXIST)
		testkit.MustOK(t, "write", x.writeFile(d+"/d/f", nil))
		wantErrno(t, "rmdir non-empty", x.rmdir(d+"/d"), syscall.ENOTEMPTY)
		wantErrno(t, "rmdir a file", x.rmdir(d+"/d/f"), syscall.ENOTDIR)
		wantErrno(t, "unlink a directory", x.remove(d+"/d"), syscall.EISDIR)
		testkit.MustOK(t, "unlink", x.remove(d+"/d/f"))
		testkit.MustOK(t, "rmdir", x.rmdir(d+"/d"))
		_, err := x.stat(d + "/d")
		wantErrno(t, "stat removed dir", err, syscall.ENOENT)
		wantErrno(t, "write into a missing directory", x.writeFile(d+"/none/f", nil), syscall.ENOENT)
	}},
}

// runPosixTable runs every case on x, except those a frontend cannot
// support (named with the reason in notApplicable, and logged): they are
// left out of the run, not skipped, so a skip always means a problem.
func runPosixTable(t *testing.T, x posixTarget, env *posixEnv, notApplicable map[string]string) {
	for i, pc := range posixCases {
		if why, ok := notApplicable[pc.name]; ok {
			t.Logf("%s: not applicable here: %s", pc.name, why)
			continue
		}
		t.Run(pc.name, func(t *testing.T) {
			d := fmt.Sprintf("case%02d", i)
			testkit.MustOK(t, "mkdir case directory", x.mkdir(d))
			pc.run(t, x, d, env)
		})
	}
}

type osTarget struct{ root string }

func (o osTarget) p(p string) string { return filepath.Join(o.root, p) }

func (o osTarget) writeFile(p string, b []byte) error { return os.WriteFile(o.p(p), b, 0o644) }

func (o osTarget) readFile(p string) ([]byte, error) { return os.ReadFile(o.p(p)) }

func (o osTarget) mkdir(p string) error { return os.Mkdir(o.p(p), 0o755) }

func (o osTarget) rename(a, b string, noReplace bool) error {
	if noReplace {
		return renameat2(o.p(a), o.p(b), 1)
	}
	return syscall.Rename(o.p(a), o.p(b)) // os.Rename refuses a directory target itself
}

func (o osTarget) link(a, b string) error { return os.Link(o.p(a), o.p(b)) }

func (o osTarget) symlink(tg, p string) error { return os.Symlink(tg, o.p(p)) }

func (o osTarget) readlink(p string) (string, error) { return os.Readlink(o.p(p)) }

func (o osTarget) stat(p string) (pstat, error) {
	fi, err := os.Lstat(o.p(p))
	if err != nil {
		return pstat{}, err
	}
	st := fi.Sys().(*syscall.Stat_t)
	return pstat{size: fi.Size(), nlink: uint32(st.Nlink), perm: st.Mode & 0o7777, isDir: fi.IsDir(),
		isLink: fi.Mode()&os.ModeSymlink != 0, mtime: fi.ModTime()}, nil
}

func (o osTarget) truncate(p string, n int64) error { return os.Truncate(o.p(p), n) }

func (o osTarget) appendFile(p string, b []byte) error {
	f, err := os.OpenFile(o.p(p), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func (o osTarget) writeAt(p string, b []byte, off int64) error {
	f, err := os.OpenFile(o.p(p), os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(b, off); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func (o osTarget) readDir(p string) ([]string, error) {
	es, err := os.ReadDir(o.p(p))
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out, err
}

func (o osTarget) remove(p string) error {
	return syscall.Unlink(o.p(p)) // os.Remove would fall back to rmdir
}

func (o osTarget) rmdir(p string) error { return syscall.Rmdir(o.p(p)) }

func (o osTarget) chmod(p string, m uint32) error { return syscall.Chmod(o.p(p), m) }

func (o osTarget) chtimes(p string, mt time.Time) error { return os.Chtimes(o.p(p), mt, mt) }

func (o osTarget) openRead(p string) (readerAtCloser, error) { return os.Open(o.p(p)) }

func (o osTarget) fsyncWrite(p string, b []byte) (func() error, error) {
	f, err := os.OpenFile(o.p(p), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, err
	}
	return f.Close, nil
}

func renameat2(from, to string, flags uint) error {
	// RENAME_NOREPLACE through renameat2(2).
	return unixRenameat2(from, to, flags)
}

type libTarget struct {
	c    *client.Client
	root string
}

func (l libTarget) p(p string) string { return path.Join(l.root, p) }

func (l libTarget) txn(fn func(ctx context.Context, tx *client.Txn) error) error {
	return l.c.Txn(context.Background(), fn)
}

func (l libTarget) writeFile(p string, b []byte) error {
	return l.txn(func(ctx context.Context, tx *client.Txn) error {
		f, err := tx.Open(ctx, l.p(p))
		if errors.Is(err, client.ErrNotFound) {
			f, err = tx.CreateFile(ctx, l.p(p), client.CreateOptions{})
		} else if err == nil {
			err = f.Truncate(0)
		}
		if err != nil {
			return err
		}
		if _, err := f.Write(b); err != nil {
			return err
		}
		return f.Close()
	})
}

func (l libTarget) readFile(p string) ([]byte, error) {
	var out []byte
	err := l.txn(func(ctx context.Context, tx *client.Txn) error {
		f, err := tx.Open(ctx, l.p(p))
		if err != nil {
			return err
		}
		out, err = io.ReadAll(f)
		return err
	})
	return out, err
}

func (l libTarget) mkdir(p string) error {
	return l.txn(func(ctx context.Context, tx *client.Txn) error { _, err := tx.Mkdir(ctx, l.p(p), 0o755); return err })
}

func (l libTarget) rename(a, b string, noReplace bool) error {
	ctx := context.Background()
	sd, err := l.c.Lookup(ctx, path.Dir(l.p(a)))
	if err != nil {
		return err
	}
	dd, err := l.c.Lookup(ctx, path.Dir(l.p(b)))
	if err != nil {
		return err
	}
	return clientx.At(clientx.Auto(l.c, clientx.Durable)).RenameAt(ctx, sd.Ino, path.Base(a), dd.Ino, path.Base(b), clientx.RenameOptions{NoReplace: noReplace})
}

func (l libTarget) link(a, b string) error {
	return l.txn(func(ctx context.Context, tx *client.Txn) error { return tx.Link(ctx, l.p(a), l.p(b)) })
}

func (l libTarget) symlink(tg, p string) error {
	return l.txn(func(ctx context.Context, tx *client.Txn) error { _, err := tx.Symlink(ctx, tg, l.p(p)); return err })
}

func (l libTarget) lstat(p string) (client.FileInfo, error) {
	var fi client.FileInfo
	err := l.txn(func(ctx context.Context, tx *client.Txn) error {
		var err error
		fi, err = tx.Lstat(ctx, l.p(p))
		return err
	})
	return fi, err
}

func (l libTarget) readlink(p string) (string, error) {
	fi, err := l.lstat(p)
	return fi.Target, err
}

func (l libTarget) stat(p string) (pstat, error) {
	fi, err := l.lstat(p)
	if err != nil {
		return pstat{}, err
	}
	return pstat{size: fi.Size, nlink: fi.Nlink, perm: client.UnixBits(fi.Mode), isDir: fi.IsDir(),
		isLink: fi.Type == client.TypeSymlink, mtime: fi.Mtime}, nil
}

func (l libTarget) truncate(p string, n int64) error {
	// Through a File: Txn.Truncate (a bare size change) keeps the old
	// bytes of a partial last block (TestBareTruncateThenExtendReadsZeros).
	return l.txn(func(ctx context.Context, tx *client.Txn) error {
		f, err := tx.Open(ctx, l.p(p))
		if err != nil {
			return err
		}
		return f.Truncate(n)
	})
}

func (l libTarget) appendFile(p string, b []byte) error {
	return l.txn(func(ctx context.Context, tx *client.Txn) error {
		f, err := tx.Open(ctx, l.p(p))
		if err != nil {
			return err
		}
		if _, err := f.Seek(0, io.SeekEnd); err != nil {
			return err
		}
		_, err = f.Write(b)
		return err
	})
}

func (l libTarget) writeAt(p string, b []byte, off int64) error {
	return l.txn(func(ctx context.Context, tx *client.Txn) error {
		f, err := tx.Open(ctx, l.p(p))
		if err != nil {
			return err
		}
		_, err = f.WriteAt(b, off)
		return err
	})
}

func (l libTarget) readDir(p string) ([]string, error) {
	var out []string
	err := l.txn(func(ctx context.Context, tx *client.Txn) error {
		es, err := tx.ReadDir(ctx, l.p(p))
		out = out[:0]
		for _, e := range es {
			out = append(out, e.Name)
		}
		return err
	})
	return out, err
}

func (l libTarget) remove(p string) error {
	return l.txn(func(ctx context.Context, tx *client.Txn) error { return tx.Unlink(ctx, l.p(p)) })
}

func (l libTarget) rmdir(p string) error {
	return l.txn(func(ctx context.Context, tx *client.Txn) error { return tx.Rmdir(ctx, l.p(p)) })
}

func (l libTarget) setAttr(p string, s client.SetAttr) error {
	return l.txn(func(ctx context.Context, tx *client.Txn) error {
		fi, err := tx.Lstat(ctx, l.p(p))
		if err != nil {
			return err
		}
		_, err = tx.SetAttr(ctx, fi.Ino, s)
		return err
	})
}

func (l libTarget) chmod(p string, m uint32) error {
	mode := client.UnixMode(m)
	return l.setAttr(p, client.SetAttr{Mode: &mode})
}

func (l libTarget) chtimes(p string, mt time.Time) error {
	return l.setAttr(p, client.SetAttr{Mtime: &mt})
}

type libReader struct {
	tx *client.Txn
	f  *client.File
}

func (r libReader) ReadAt(p []byte, off int64) (int, error) { return r.f.ReadAt(p, off) }

func (r libReader) Close() error { return r.tx.Abort(context.Background()) }

func (l libTarget) openRead(p string) (readerAtCloser, error) {
	ctx := context.Background()
	tx := l.c.Begin()
	f, err := tx.Open(ctx, l.p(p))
	if err != nil {
		tx.Abort(ctx)
		return nil, err
	}
	return libReader{tx, f}, nil
}

func (l libTarget) fsyncWrite(p string, b []byte) (func() error, error) {
	err := l.txn(func(ctx context.Context, tx *client.Txn) error {
		f, err := tx.CreateFile(ctx, l.p(p), client.CreateOptions{})
		if err != nil {
			return err
		}
		_, err = f.Write(b)
		return err
	})
	return func() error { return nil }, err
}

// TestPosixFUSE runs the POSIX table through a FUSE mount.
func TestPosixFUSE(t *testing.T) {
	testkit.NeedFUSE(t)
	c := clustertest.Start(t, clustertest.Options{})
	m := testkit.StartMount(t, c)
	other := c.Client(client.Config{})
	defer other.Close()
	runPosixTable(t, osTarget{m.Dir}, &posixEnv{other: other, plasmaRoot: "/"}, nil)
}

// TestPosixClientLibrary runs the POSIX table against the client library
// (path operations, one transaction each).
func TestPosixClientLibrary(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	cl := c.Client(client.Config{})
	defer cl.Close()
	other := c.Client(client.Config{})
	defer other.Close()
	testkit.MustOK(t, "mkdir", libTarget{cl, "/"}.mkdir("lib"))
	runPosixTable(t, libTarget{cl, "/lib"}, &posixEnv{other: other, plasmaRoot: "/lib"}, nil)
}
