package posix

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	nfsc "github.com/willscott/go-nfs-client/nfs"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// nfsErrno maps the Go NFS client's errors to errnos.
func nfsErrno(err error) error {
	var ne *nfsc.Error
	switch {
	case err == nil:
		return nil
	case errors.Is(err, os.ErrNotExist):
		return syscall.ENOENT
	case errors.Is(err, os.ErrExist):
		return syscall.EEXIST
	case errors.Is(err, os.ErrPermission):
		return syscall.EPERM
	case errors.As(err, &ne):
		switch ne.ErrorNum {
		case nfsc.NFS3ErrNotEmpty:
			return syscall.ENOTEMPTY
		case 63:
			return syscall.ENAMETOOLONG
		case 70:
			return syscall.ESTALE
		}
		if ne.ErrorNum < 1000 {
			return syscall.Errno(ne.ErrorNum)
		}
	}
	return err
}

// nfsTarget drives the POSIX table through an NFS client nobody here
// wrote (github.com/willscott/go-nfs-client).
type nfsTarget struct{ tg *nfsc.Target }

func (n nfsTarget) p(p string) string { return "/" + p }

func (n nfsTarget) writeFile(p string, b []byte) error {
	if _, _, err := n.tg.Lookup(n.p(p)); err == nil {
		if err := n.tg.Setattr(n.p(p), nfsc.Sattr3{Size: nfsc.SetSize{SetIt: true, Size: 0}}); err != nil {
			return nfsErrno(err)
		}
	}
	f, err := n.tg.OpenFile(n.p(p), 0o644)
	if err != nil {
		return nfsErrno(err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return nfsErrno(err)
	}
	return nfsErrno(f.Close())
}

func (n nfsTarget) readFile(p string) ([]byte, error) {
	b, err := testkit.NFSReadFile(n.tg, p)
	return b, nfsErrno(err)
}

func (n nfsTarget) mkdir(p string) error {
	_, err := n.tg.Mkdir(n.p(p), 0o755)
	return nfsErrno(err)
}

func (n nfsTarget) rename(a, b string, noReplace bool) error {
	if noReplace { // NFSv3 has no RENAME_NOREPLACE: the client checks
		if _, _, err := n.tg.Lookup(n.p(b)); err == nil {
			return syscall.EEXIST
		}
	}
	return nfsErrno(n.tg.Rename(n.p(a), n.p(b)))
}

func (n nfsTarget) link(a, b string) error {
	_, fh, err := n.tg.Lookup(n.p(a))
	if err != nil {
		return nfsErrno(err)
	}
	_, dfh, err := n.tg.Lookup(path.Dir(n.p(b)))
	if err != nil {
		return nfsErrno(err)
	}
	return nfsErrno(nfsLink(n.tg, fh, dfh, path.Base(b)))
}

func (n nfsTarget) symlink(tg, p string) error {
	return nfsErrno(n.tg.Symlink(tg, n.p(p)))
}

func (n nfsTarget) readlink(p string) (string, error) {
	f, err := n.tg.Open(n.p(p))
	if err != nil {
		return "", nfsErrno(err)
	}
	s, err := f.Readlink()
	return s, nfsErrno(err)
}

func (n nfsTarget) stat(p string) (pstat, error) {
	fi, _, err := n.tg.Lookup(n.p(p))
	if err != nil {
		return pstat{}, nfsErrno(err)
	}
	a := fi.(*nfsc.Fattr)
	return pstat{size: int64(a.Filesize), nlink: a.Nlink, perm: a.FileMode & 0o7777, isDir: a.Type == nfsc.NF3Dir,
		isLink: a.Type == nfsc.NF3Lnk, mtime: a.ModTime()}, nil
}

func (n nfsTarget) truncate(p string, size int64) error {
	return nfsErrno(n.tg.Setattr(n.p(p), nfsc.Sattr3{Size: nfsc.SetSize{SetIt: true, Size: uint64(size)}}))
}

func (n nfsTarget) appendFile(p string, b []byte) error { // NFS has no O_APPEND: at the size
	fi, _, err := n.tg.Lookup(n.p(p))
	if err != nil {
		return nfsErrno(err)
	}
	return n.writeAt(p, b, fi.Size())
}

func (n nfsTarget) writeAt(p string, b []byte, off int64) error {
	f, err := n.tg.Open(n.p(p))
	if err != nil {
		return nfsErrno(err)
	}
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return nfsErrno(err)
	}
	return nfsErrno(f.Close())
}

func (n nfsTarget) readDir(p string) ([]string, error) {
	es, err := n.tg.ReadDirPlus(n.p(p))
	var out []string
	for _, e := range es {
		if e.FileName != "." && e.FileName != ".." {
			out = append(out, e.FileName)
		}
	}
	return out, nfsErrno(err)
}

func (n nfsTarget) remove(p string) error { return nfsErrno(n.tg.Remove(n.p(p))) }

func (n nfsTarget) rmdir(p string) error { return nfsErrno(n.tg.RmDir(n.p(p))) }

func (n nfsTarget) chmod(p string, m uint32) error {
	return nfsErrno(n.tg.Setattr(n.p(p), nfsc.Sattr3{Mode: nfsc.SetMode{SetIt: true, Mode: m}}))
}

func (n nfsTarget) chtimes(p string, mt time.Time) error {
	t := nfsc.NFS3Time{Seconds: uint32(mt.Unix()), Nseconds: uint32(mt.Nanosecond())}
	return nfsErrno(n.tg.Setattr(n.p(p), nfsc.Sattr3{Mtime: nfsc.SetTime{SetIt: nfsc.SetToClientTime, Time: t},
		Atime: nfsc.SetTime{SetIt: nfsc.SetToClientTime, Time: t}}))
}

func (n nfsTarget) openRead(p string) (readerAtCloser, error) {
	f, err := n.tg.Open(n.p(p))
	return f, nfsErrno(err)
}

func (n nfsTarget) fsyncWrite(p string, b []byte) (func() error, error) {
	// Every NFS WRITE to the bridge is stable (FILE_SYNC) before the reply.
	f, err := n.tg.OpenFile(n.p(p), 0o644)
	if err != nil {
		return nil, nfsErrno(err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return nil, nfsErrno(err)
	}
	return f.Close, nil
}

// TestPosixNFS runs the POSIX table through the NFS bridge with the Go
// NFSv3 client.
func TestPosixNFS(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	b := testkit.StartNFS(t, c)
	other := c.Client(client.Config{})
	defer other.Close()
	runPosixTable(t, nfsTarget{testkit.DialNFS(t, b.Addr)}, &posixEnv{other: other, plasmaRoot: "/"}, map[string]string{
		"unlink-while-open": "NFS is stateless: clients keep removed open files by silly-renaming them, the server cannot",
	})
}

// TestNFSHandlesSurviveRestartAndRename: a file handle taken before the
// bridge restarts, and before another client renames the file's parent
// directory, still reads the file.
func TestNFSHandlesSurviveRestartAndRename(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	b := testkit.StartNFS(t, c)
	tg := testkit.DialNFS(t, b.Addr)
	_, err := tg.Mkdir("/a", 0o755)
	testkit.MustOK(t, "mkdir", err)
	_, err = tg.Mkdir("/a/b", 0o755)
	testkit.MustOK(t, "mkdir", err)
	f, err := tg.OpenFile("/a/b/f", 0o644)
	testkit.MustOK(t, "create", err)
	_, err = f.Write([]byte("survives"))
	testkit.MustOK(t, "write", err)
	testkit.MustOK(t, "close", f.Close())
	_, fh, err := tg.Lookup("/a/b/f")
	testkit.MustOK(t, "lookup", err)

	// Another client renames an ancestor.
	c.MustRun("mv", "/a", "/moved")
	// The bridge restarts (on another port: a new process).
	b.Cmd.Process.Signal(syscall.SIGTERM)
	<-b.Done
	b2 := testkit.StartNFS(t, c)
	tg2 := testkit.DialNFS(t, b2.Addr)
	attr, err := tg2.GetAttr(fh)
	if err != nil {
		t.Fatalf("GETATTR with a handle from before the restart and rename: %v", err)
	}
	if attr.Filesize != 8 {
		t.Fatalf("size %d, want 8", attr.Filesize)
	}
	// READ by the old handle.
	got, err := readByHandle(tg2, fh, 8)
	if err != nil || string(got) != "survives" {
		t.Fatalf("read by old handle: %q %v", got, err)
	}
}

// readByHandle reads n bytes of the file with handle fh by looking it up
// through its current path (the Go client opens by path only): the path
// comes from the bridge's own answer for the handle.
func readByHandle(tg *nfsc.Target, fh []byte, n int) ([]byte, error) {
	// The client library offers no READ by raw handle; find the file's
	// current name by listing from the root and comparing handles.
	var walk func(dir string) (string, error)
	walk = func(dir string) (string, error) {
		es, err := tg.ReadDirPlus(dir)
		if err != nil {
			return "", err
		}
		for _, e := range es {
			if e.FileName == "." || e.FileName == ".." {
				continue
			}
			p := path.Join(dir, e.FileName)
			if e.Handle.IsSet && bytes.Equal(e.Handle.FH, fh) {
				return p, nil
			}
			if e.Attr.IsSet && e.Attr.Attr.Type == nfsc.NF3Dir {
				if q, err := walk(p); err == nil && q != "" {
					return q, nil
				}
			}
		}
		return "", nil
	}
	p, err := walk("/")
	if err != nil || p == "" {
		return nil, errors.Join(err, errors.New("handle not found in the tree"))
	}
	f, err := tg.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, n)
	k, err := f.ReadAt(b, 0)
	if k == n {
		err = nil
	}
	return b[:k], err
}

// TestNFSLibnfsTools: libnfs-utils (nfs-cp, nfs-ls, nfs-cat), a real NFS
// client nobody here wrote, copy a file in and out of the bridge.
func TestNFSLibnfsTools(t *testing.T) {
	if _, err := exec.LookPath("nfs-cp"); err != nil {
		t.Fatal("libnfs-utils not installed: make test installs it (apt-get install -y libnfs-utils)")
	}
	c := clustertest.Start(t, clustertest.Options{})
	b := testkit.StartNFS(t, c)
	q := "?nfsport=" + b.Port + "&mountport=" + b.Port + "&auto-traverse-mounts=0"
	dir := t.TempDir()
	in := filepath.Join(dir, "in.bin")
	data := testkit.SeededBytes(3<<20+17, 11)
	testkit.MustOK(t, "write", os.WriteFile(in, data, 0o644))
	testkit.Shell(t, dir, "nfs-cp "+in+" 'nfs://127.0.0.1//in.bin"+q+"'")
	testkit.Shell(t, dir, "nfs-cp 'nfs://127.0.0.1//in.bin"+q+"' out.bin")
	got, err := os.ReadFile(filepath.Join(dir, "out.bin"))
	testkit.MustOK(t, "read", err)
	if !bytes.Equal(got, data) {
		t.Fatalf("nfs-cp out: %d bytes, want the %d copied in", len(got), len(data))
	}
	if out := testkit.Shell(t, dir, "nfs-ls 'nfs://127.0.0.1/"+q+"'"); !strings.Contains(out, "in.bin") {
		t.Fatalf("nfs-ls: %s", out)
	}
	// libnfs's default lists the exports (MOUNT EXPORT) before mounting.
	qExports := "?nfsport=" + b.Port + "&mountport=" + b.Port
	if out := testkit.Shell(t, dir, "nfs-ls 'nfs://127.0.0.1/"+qExports+"'"); !strings.Contains(out, "in.bin") {
		t.Fatalf("nfs-ls with export listing: %s", out)
	}
	// What went in over NFS is the file in PlasmaFS.
	if out := c.MustRun("cat", "/in.bin"); out != string(data) {
		t.Fatalf("plasma cat of the file copied in over NFS: %d bytes", len(out))
	}
}
