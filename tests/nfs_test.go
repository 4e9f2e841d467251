package tests

import (
	"bufio"
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
	"github.com/willscott/go-nfs-client/nfs/rpc"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clustertest"
)

// nfsBridge is a 'plasma nfs' process.
type nfsBridge struct {
	Addr string
	Port string
	cmd  *exec.Cmd
	done chan struct{}
}

// startNFS starts 'plasma nfs' on a free loopback port and returns once
// it listens. It serves uid 0 as root (-no-root-squash): the tests act as
// root (dialNFS, and libnfs run by root), as the owner of what the
// cluster's superuser made (nfs_identity_test.go tests squashing).
func startNFS(t *testing.T, c *clustertest.Procs, args ...string) *nfsBridge {
	t.Helper()
	return startNFSArgs(t, c, append([]string{"-listen", "127.0.0.1:0", "-no-root-squash"}, args...)...)
}

// startNFSArgs starts 'plasma nfs' with exactly args and returns once it
// listens.
func startNFSArgs(t *testing.T, c *clustertest.Procs, args ...string) *nfsBridge {
	t.Helper()
	b := &nfsBridge{done: make(chan struct{})}
	b.cmd = exec.Command(c.Bin, append([]string{"nfs"}, args...)...)
	b.cmd.Env = append(c.Env(), os.Getenv("PLASMA_NFS_ENV"))
	b.cmd.Stderr = os.Stderr
	out, err := b.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := b.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		b.cmd.Process.Signal(syscall.SIGTERM)
		<-b.done
	})
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if l := sc.Text(); strings.HasPrefix(l, "plasma: serving NFSv3") {
			b.Addr = l[strings.LastIndex(l, " ")+1:]
			break
		}
	}
	go func() {
		for sc.Scan() {
		}
		b.cmd.Wait()
		close(b.done)
	}()
	if b.Addr == "" {
		<-b.done
		t.Fatalf("plasma nfs did not start (exit %d)", b.cmd.ProcessState.ExitCode())
	}
	b.Port = b.Addr[strings.LastIndex(b.Addr, ":")+1:]
	return b
}

// dialNFS mounts the bridge's export with the Go NFSv3 client, as root
// (AUTH_UNIX uid 0: calls without a credential are anonymous).
func dialNFS(t *testing.T, addr string) *nfsc.Target {
	t.Helper()
	return dialNFSAs(t, addr, rpc.NewAuthUnix("client", 0, 0).Auth())
}

// dialNFSAs mounts the export with the credential auth on every call.
func dialNFSAs(t *testing.T, addr string, auth rpc.Auth) *nfsc.Target {
	t.Helper()
	// The client binds a random local port and does not retry when it is
	// taken: try a few times.
	var rc *rpc.Client
	var err error
	for i := 0; i < 20; i++ {
		if rc, err = rpc.DialTCP("tcp", addr, false); err == nil || !errors.Is(err, syscall.EADDRINUSE) {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rc.Close)
	m := &nfsc.Mount{Client: rc}
	tg, err := m.Mount("/", auth)
	if err != nil {
		t.Fatalf("NFS mount: %v", err)
	}
	return tg
}

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
	f, err := n.tg.Open(n.p(p))
	if err != nil {
		return nil, nfsErrno(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
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
func (n nfsTarget) rmdir(p string) error  { return nfsErrno(n.tg.RmDir(n.p(p))) }
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
	b := startNFS(t, c)
	other := c.Client(client.Config{})
	defer other.Close()
	runPosixTable(t, nfsTarget{dialNFS(t, b.Addr)}, &posixEnv{other: other, plasmaRoot: "/"}, map[string]string{
		"unlink-while-open": "NFS is stateless: clients keep removed open files by silly-renaming them, the server cannot",
	})
}

// TestNFSHandlesSurviveRestartAndRename: a file handle taken before the
// bridge restarts, and before another client renames the file's parent
// directory, still reads the file.
func TestNFSHandlesSurviveRestartAndRename(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	b := startNFS(t, c)
	tg := dialNFS(t, b.Addr)
	_, err := tg.Mkdir("/a", 0o755)
	mustOK(t, "mkdir", err)
	_, err = tg.Mkdir("/a/b", 0o755)
	mustOK(t, "mkdir", err)
	f, err := tg.OpenFile("/a/b/f", 0o644)
	mustOK(t, "create", err)
	_, err = f.Write([]byte("survives"))
	mustOK(t, "write", err)
	mustOK(t, "close", f.Close())
	_, fh, err := tg.Lookup("/a/b/f")
	mustOK(t, "lookup", err)

	// Another client renames an ancestor.
	c.MustRun("mv", "/a", "/moved")
	// The bridge restarts (on another port: a new process).
	b.cmd.Process.Signal(syscall.SIGTERM)
	<-b.done
	b2 := startNFS(t, c)
	tg2 := dialNFS(t, b2.Addr)
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
	b := startNFS(t, c)
	q := "?nfsport=" + b.Port + "&mountport=" + b.Port + "&auto-traverse-mounts=0"
	dir := t.TempDir()
	in := filepath.Join(dir, "in.bin")
	data := randBytes(3<<20+17, 11)
	mustOK(t, "write", os.WriteFile(in, data, 0o644))
	run(t, dir, "nfs-cp "+in+" 'nfs://127.0.0.1//in.bin"+q+"'")
	run(t, dir, "nfs-cp 'nfs://127.0.0.1//in.bin"+q+"' out.bin")
	got, err := os.ReadFile(filepath.Join(dir, "out.bin"))
	mustOK(t, "read", err)
	if !bytes.Equal(got, data) {
		t.Fatalf("nfs-cp out: %d bytes, want the %d copied in", len(got), len(data))
	}
	if out := run(t, dir, "nfs-ls 'nfs://127.0.0.1/"+q+"'"); !strings.Contains(out, "in.bin") {
		t.Fatalf("nfs-ls: %s", out)
	}
	// libnfs's default lists the exports (MOUNT EXPORT) before mounting.
	qExports := "?nfsport=" + b.Port + "&mountport=" + b.Port
	if out := run(t, dir, "nfs-ls 'nfs://127.0.0.1/"+qExports+"'"); !strings.Contains(out, "in.bin") {
		t.Fatalf("nfs-ls with export listing: %s", out)
	}
	// What went in over NFS is the file in PlasmaFS.
	if out := c.MustRun("cat", "/in.bin"); out != string(data) {
		t.Fatalf("plasma cat of the file copied in over NFS: %d bytes", len(out))
	}
}
