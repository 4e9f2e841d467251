// Package nfsbridge serves PlasmaFS over NFSv3 (and MOUNT, on the same
// port) with github.com/willscott/go-nfs: a go-nfs Handler and a billy
// filesystem that are a thin adapter over internal/vfs.
//
// # File handles
//
// A handle is the inode number (plus the inode of the directory it was
// found in, for LOOKUP ".."), with a MAC when the bridge has a
// credential, so that clients use only handles it gave out: inode numbers
// are never reused, so handles survive a restart of the bridge (with the
// same credential) and any rename, of the file or of an ancestor, by any
// client. go-nfs addresses everything by path: the paths it hands the
// billy filesystem start with an inode component ("\x00" + decimal inode
// number, which no name can contain, and a LOOKUP of such a name is
// refused before go-nfs sees it), from which the remaining names are
// looked up, so no request resolves a full path.
//
// # Semantics
//
// Metadata operations are stable before the reply (RFC 1813), each a
// Durable commit, unless the bridge runs with Async (then they are
// acknowledged once applied, durable within the namenode's window; like
// knfsd's async export). WRITE honours its stability: an UNSTABLE write
// goes into the file's open transaction in the VFS (read back at once by
// every client of the bridge) and is answered UNSTABLE; COMMIT makes it
// durable (and with it everything acknowledged before); a FILE_SYNC or
// DATA_SYNC write is durable before the reply (with Async it is committed
// but answered UNSTABLE, so the client's COMMIT makes it durable). A file
// with unstable writes and no COMMIT for a while is committed anyway, so
// that other PlasmaFS clients see its data. The write verifier is random
// per process: after a restart clients see a new one and resend what they
// had not committed. Readdir pages come from one listing per cookie
// verifier (the directory is read in namenode pages). A call retransmitted
// on the connection it came on (same xid) is dropped, not run again
// (retransmit.go): calls wait out a namenode failover, past clients'
// timeouts.
//
// # Callers
//
// AUTH_UNIX authenticates nobody, so the bridge limits what a claimed uid
// is worth (identity.go): uid 0, and calls without an AUTH_UNIX
// credential, are served as an anonymous identity unless the export says
// otherwise (Options), and the anonymous identity has other's rights on
// everything but what is its own by name. Which machines may connect at
// all is a listener wrapper's business (Gate, clients.go).
//
// # go-nfs v0.0.4 limitations worked around here
//
// go-nfs registers its procedures with functions of an unexported type,
// so they cannot be replaced from outside it. Every connection passes
// through an interceptor instead (rpcconn.go): it reads whole RPC records
// and answers these procedures itself (procs.go), passing the rest to
// go-nfs unchanged:
//
//   - WRITE and COMMIT: go-nfs answers every WRITE FILE_SYNC after an
//     open, write and close, and its COMMIT never reaches the filesystem.
//   - LINK: go-nfs parses its arguments in the wrong order (hard links
//     could not be made over NFS).
//   - REMOVE, RMDIR, RENAME: go-nfs reports most errors as NFS3ERR_IO or
//     NFS3ERR_ACCES; here ENOTEMPTY, ENOTDIR, EISDIR, EINVAL, EXDEV… map to
//     their NFSv3 statuses (nfsStatus), a conflict with another
//     transaction to NFS3ERR_JUKEBOX (the client retries).
//   - MOUNT EXPORT, DUMP and UMNTALL are not implemented by go-nfs (libnfs
//     lists the exports before mounting unless auto-traverse-mounts=0).
//   - Unknown programs, versions and procedures get PROG_UNAVAIL,
//     PROG_MISMATCH and PROC_UNAVAIL (go-nfs encodes those replies badly).
//
// Worked around in the billy adapter below:
//
//   - The XDR padding after a file handle is not skipped: handles are 20
//     bytes, a multiple of 4.
//   - SETATTR(size) opens with O_WRONLY|O_EXCL: O_EXCL without O_CREATE is
//     ignored (as Linux does).
//   - MOUNT ignores nothing here: the dirpath of MNT must be "/" or the
//     export path; the export is the root of the handles.
//   - billy.Change is implemented (chmod, chown, utimes), without which
//     CREATE and SETATTR fail.
//
// Not worked around: SETATTR drops the setuid, setgid and sticky bits
// (go-nfs passes mode & ModePerm).
package nfsbridge

import (
	"context"
	"crypto/ecdsa"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	billy "github.com/go-git/go-billy/v5"
	nfs "github.com/willscott/go-nfs"
	nfsfile "github.com/willscott/go-nfs/file"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/connlimit"
	"github.com/plasmafs/plasma/internal/vfs"
)

// Bridge serves one export of a VFS over NFSv3.
type Bridge struct {
	v    *vfs.VFS
	root uint64 // inode of the export
	// handleKey: the key of the handles' MACs (nil: handles carry none).
	handleKey []byte
	fs        *billyFS
	id        identity // who callers are served as

	// async: the VFS commits metadata operations Async (plasma nfs
	// -async); otherwise each is durable before the reply.
	async  bool
	open   *openFiles
	onCall func(proc string) // Options.OnCall

	mu        sync.Mutex
	verifiers map[uint64]listing // readdir listings by cookie verifier
	order     []uint64
}

type listing struct {
	path    string
	entries []os.FileInfo
}

// New returns a bridge exporting directory export (a PlasmaFS path) of v,
// serving its callers as o says.
func New(ctx context.Context, v *vfs.VFS, export string, o Options) (*Bridge, error) {
	if export == "" {
		export = "/"
	}
	a, err := v.LookupPath(ctx, export)
	if err != nil {
		return nil, fmt.Errorf("export %s: %w", export, err)
	}
	if !a.IsDir() {
		return nil, fmt.Errorf("export %s: not a directory", export)
	}
	b := &Bridge{v: v, root: a.Ino, handleKey: handleKeyOf(v), id: newIdentity(v, o), verifiers: map[uint64]listing{}, async: !v.Durable(), open: newOpenFiles(),
		onCall: o.OnCall}
	b.fs = &billyFS{b: b}
	return b, nil
}

// Serve serves NFSv3 and MOUNT on l until l is closed.
// Files it holds open (and UNSTABLE writes) are committed when it returns.
func (b *Bridge) Serve(l net.Listener) error {
	ic := &interceptor{route: b.countedRoute}
	// connlimit's listener outlasts running out of file descriptors (on
	// which go-nfs would return) and bounds idle and slow peers.
	err := nfs.Serve(ic.listener(connlimit.Listen(l, connlimit.Options{Name: "nfs"})), &handler{b: b})
	b.closeAll()
	return err
}

// ---- handles

const handleVersion = 1

// A handle is 20 bytes: version, 3 zero bytes, inode, parent inode, and
// when the bridge has a credential 8 more: a MAC of the 20 under a key
// derived from its private key, so that a client cannot make up the
// handle of an inode it was not given (outside the export, or below a
// directory it may not search); handles survive a restart with the same
// credential. Its length is a multiple of 4 on purpose: go-nfs v0.0.4
// does not skip the XDR padding of a handle, so the arguments after a
// handle of another length are read from the wrong place (ACCESS then
// grants nothing).
const (
	handleLen = 20
	handleMAC = 8
)

// handleKeyOf is the key of the handles' MACs: derived from the private
// key of v's credential; nil without one (security level none, where
// nothing stops a client of this machine from reading anything anyway).
func handleKeyOf(v *vfs.VFS) []byte {
	cred := v.Client().Credential()
	if cred == nil {
		return nil
	}
	k, ok := cred.Cert.PrivateKey.(*ecdsa.PrivateKey)
	if !ok {
		return nil
	}
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		return nil
	}
	m := hmac.New(sha256.New, der)
	m.Write([]byte("plasma nfs file handles"))
	return m.Sum(nil)
}

func (b *Bridge) handleMAC(h []byte) []byte {
	m := hmac.New(sha256.New, b.handleKey)
	m.Write(h[:handleLen])
	return m.Sum(nil)[:handleMAC]
}

func (b *Bridge) encodeHandle(ino, parent uint64) []byte {
	h := make([]byte, handleLen, handleLen+handleMAC)
	h[0] = handleVersion
	binary.BigEndian.PutUint64(h[4:], ino)
	binary.BigEndian.PutUint64(h[12:], parent)
	if b.handleKey != nil {
		h = append(h, b.handleMAC(h)...)
	}
	return h
}

func (b *Bridge) decodeHandle(h []byte) (ino, parent uint64, err error) {
	n := handleLen
	if b.handleKey != nil {
		n += handleMAC
	}
	if len(h) != n || h[0] != handleVersion || b.handleKey != nil && !hmac.Equal(h[handleLen:], b.handleMAC(h)) {
		return 0, 0, errors.New("not a PlasmaFS file handle")
	}
	return binary.BigEndian.Uint64(h[4:]), binary.BigEndian.Uint64(h[12:]), nil
}

func inoComponent(ino uint64) string { return "\x00" + strconv.FormatUint(ino, 10) }

func parseInoComponent(c string) (uint64, bool) {
	if len(c) < 2 || c[0] != 0 {
		return 0, false
	}
	n, err := strconv.ParseUint(c[1:], 10, 64)
	return n, err == nil
}

type handler struct{ b *Bridge }

func (h *handler) Mount(ctx context.Context, conn net.Conn, req nfs.MountRequest) (nfs.MountStatus, billy.Filesystem, []nfs.AuthFlavor) {
	return nfs.MountStatusOk, h.b.fs, []nfs.AuthFlavor{nfs.AuthFlavorNull, nfs.AuthFlavorUnix}
}

func (h *handler) Change(fs billy.Filesystem) billy.Change {
	if h.b.v.ReadOnly() {
		return nil
	}
	return h.b.fs
}

func (h *handler) FSStat(ctx context.Context, fs billy.Filesystem, s *nfs.FSStat) error {
	st, err := h.b.v.StatFS(ctx)
	if err != nil {
		return err
	}
	s.TotalSize = st.TotalBlocks * uint64(st.Blocksize)
	s.FreeSize = st.FreeBlocks * uint64(st.Blocksize)
	s.AvailableSize = s.FreeSize
	s.TotalFiles = st.Files + 1<<20
	s.FreeFiles = 1 << 20
	s.AvailableFiles = 1 << 20
	return nil
}

// ToHandle encodes the inode a path names.
func (h *handler) ToHandle(fs billy.Filesystem, p []string) []byte {
	if len(p) == 0 {
		return h.b.encodeHandle(h.b.root, h.b.root)
	}
	ctx := context.Background()
	parent, err := h.b.resolve(ctx, p[:len(p)-1])
	if err != nil {
		return h.b.encodeHandle(0, 0)
	}
	ino, err := h.b.step(ctx, parent, p[len(p)-1])
	if err != nil {
		return h.b.encodeHandle(0, 0)
	}
	return h.b.encodeHandle(ino, parent)
}

// FromHandle returns the inode path of a handle: [] for the export,
// [parent, ino] otherwise (so that LOOKUP ".." finds the parent).
func (h *handler) FromHandle(fh []byte) (billy.Filesystem, []string, error) {
	ino, parent, err := h.b.decodeHandle(fh)
	if err != nil || ino == 0 {
		return nil, nil, errors.New("stale file handle")
	}
	switch {
	case ino == h.b.root:
		return h.b.fs, []string{}, nil
	case parent == h.b.root || parent == 0:
		return h.b.fs, []string{inoComponent(ino)}, nil
	}
	return h.b.fs, []string{inoComponent(parent), inoComponent(ino)}, nil
}

func (h *handler) InvalidateHandle(billy.Filesystem, []byte) error { return nil }

// HandleLimit: handles need no state, so there is no limit; go-nfs
// returns up to half of it as entries of one READDIR page.
func (h *handler) HandleLimit() int { return 1 << 20 }

// VerifierFor remembers a directory listing for the following pages of
// the same READDIR sequence.
func (h *handler) VerifierFor(p string, contents []os.FileInfo) uint64 {
	f := fnv.New64a()
	fmt.Fprintf(f, "%s\x00%d\x00%d", p, len(contents), time.Now().UnixNano())
	ver := f.Sum64() | 1
	b := h.b
	b.mu.Lock()
	defer b.mu.Unlock()
	b.verifiers[ver] = listing{p, contents}
	b.order = append(b.order, ver)
	for len(b.order) > 64 {
		delete(b.verifiers, b.order[0])
		b.order = b.order[1:]
	}
	return ver
}

// DataForVerifier returns a listing remembered by VerifierFor.
func (h *handler) DataForVerifier(p string, ver uint64) []os.FileInfo {
	b := h.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if l, ok := b.verifiers[ver]; ok && l.path == p {
		return l.entries
	}
	return nil
}

var _ nfs.Handler = (*handler)(nil)
var _ nfs.CachingHandler = (*handler)(nil)

// ---- paths

func split(p string) []string {
	var out []string
	for _, c := range strings.Split(p, "/") {
		if c != "" && c != "." {
			out = append(out, c)
		}
	}
	return out
}

// resolve returns the inode named by path components (relative to the
// export; an inode component restarts from that inode).
func (b *Bridge) resolve(ctx context.Context, comps []string) (uint64, error) {
	cur := b.root
	for _, c := range comps {
		next, err := b.step(ctx, cur, c)
		if err != nil {
			return 0, err
		}
		cur = next
	}
	return cur, nil
}

func (b *Bridge) step(ctx context.Context, dir uint64, c string) (uint64, error) {
	if ino, ok := parseInoComponent(c); ok {
		return ino, nil
	}
	if c == ".." {
		if dir == b.root {
			return dir, nil
		}
		return b.v.Parent(ctx, dir)
	}
	a, err := b.v.Lookup(ctx, dir, c)
	if err != nil {
		return 0, err
	}
	return a.Ino, nil
}

func (b *Bridge) resolvePath(p string) (uint64, error) {
	return b.resolve(context.Background(), split(p))
}

// resolveParent returns the directory inode and the last name of p.
func (b *Bridge) resolveParent(p string) (uint64, string, error) {
	comps := split(p)
	if len(comps) == 0 {
		return 0, "", syscall.EINVAL
	}
	last := comps[len(comps)-1]
	if _, ok := parseInoComponent(last); ok || last == ".." {
		return 0, "", syscall.EINVAL
	}
	dir, err := b.resolve(context.Background(), comps[:len(comps)-1])
	return dir, last, err
}

// ---- errors: go-nfs tells errors apart with os.IsNotExist,
// os.IsPermission and os.IsExist.

type pathError struct {
	op, path string
	errno    syscall.Errno
}

func (e *pathError) Error() string {
	return e.op + " " + strings.ReplaceAll(e.path, "\x00", "#") + ": " + e.errno.Error()
}
func (e *pathError) Unwrap() error { return e.errno }

func fail(op, p string, err error) error {
	if err == nil {
		return nil
	}
	return &pathError{op, p, vfs.Errno(err)}
}

// ---- the billy filesystem

type billyFS struct{ b *Bridge }

type fileInfo struct {
	name string
	a    vfs.Attr
	v    *vfs.VFS
}

func (fi *fileInfo) Name() string { return fi.name }
func (fi *fileInfo) Size() int64  { return fi.a.Size }

// Mode is what go-nfs turns into the NFS mode with a plain uint32(): the
// setuid, setgid and sticky bits go as their Unix values (04000, 02000,
// 01000), which Go's FileMode keeps elsewhere.
func (fi *fileInfo) Mode() os.FileMode {
	special := os.ModeSetuid | os.ModeSetgid | os.ModeSticky
	return vfs.FileMode(fi.a)&^special | os.FileMode(client.UnixBits(fi.a.Mode)&0o7000)
}
func (fi *fileInfo) ModTime() time.Time { return fi.a.Mtime }
func (fi *fileInfo) IsDir() bool        { return fi.a.IsDir() }
func (fi *fileInfo) Sys() any {
	n := fi.a.Nlink
	if n == 0 && fi.a.IsDir() {
		n = 2
	}
	return &nfsfile.FileInfo{Nlink: n, UID: fi.v.UID(fi.a.User), GID: fi.v.GID(fi.a.Group), Fileid: fi.a.Ino}
}

func (fs *billyFS) info(name string, a vfs.Attr) *fileInfo {
	return &fileInfo{name: path.Base("/" + name), a: a, v: fs.b.v}
}

func (fs *billyFS) Create(name string) (billy.File, error) {
	return fs.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o666)
}

func (fs *billyFS) Open(name string) (billy.File, error) { return fs.OpenFile(name, os.O_RDONLY, 0) }

func (fs *billyFS) OpenFile(name string, flag int, perm os.FileMode) (billy.File, error) {
	ctx := context.Background()
	v := fs.b.v
	if flag&os.O_CREATE != 0 {
		dir, base, err := fs.b.resolveParent(name)
		if err != nil {
			return nil, fail("create", name, err)
		}
		a, fh, err := v.Create(ctx, dir, base, uint32(perm.Perm()), flag)
		if err != nil {
			return nil, fail("create", name, err)
		}
		return &file{fs: fs, name: name, ino: a.Ino, fh: fh}, nil
	}
	ino, err := fs.b.resolvePath(name)
	if err != nil {
		return nil, fail("open", name, err)
	}
	// go-nfs opens with O_EXCL for SETATTR(size): without O_CREATE it
	// means nothing (as on Linux).
	fh, err := v.Open(ctx, ino, flag&^os.O_EXCL)
	if err != nil {
		return nil, fail("open", name, err)
	}
	return &file{fs: fs, name: name, ino: ino, fh: fh}, nil
}

func (fs *billyFS) Stat(name string) (os.FileInfo, error) { return fs.Lstat(name) }

func (fs *billyFS) Lstat(name string) (os.FileInfo, error) {
	ino, err := fs.b.resolvePath(name)
	if err != nil {
		return nil, fail("stat", name, err)
	}
	a, err := fs.b.v.GetAttr(context.Background(), ino)
	if err != nil {
		return nil, fail("stat", name, err)
	}
	return fs.info(name, a), nil
}

func (fs *billyFS) Rename(from, to string) error {
	sd, sn, err := fs.b.resolveParent(from)
	if err != nil {
		return fail("rename", from, err)
	}
	dd, dn, err := fs.b.resolveParent(to)
	if err != nil {
		return fail("rename", to, err)
	}
	return fail("rename", from, fs.b.v.Rename(context.Background(), sd, sn, dd, dn, 0))
}

func (fs *billyFS) Remove(name string) error {
	ctx := context.Background()
	dir, base, err := fs.b.resolveParent(name)
	if err != nil {
		return fail("remove", name, err)
	}
	a, err := fs.b.v.Lookup(ctx, dir, base)
	if err != nil {
		return fail("remove", name, err)
	}
	if a.IsDir() {
		return fail("rmdir", name, fs.b.v.Rmdir(ctx, dir, base))
	}
	return fail("remove", name, fs.b.v.Unlink(ctx, dir, base))
}

func (fs *billyFS) Join(elem ...string) string { return strings.Join(elem, "/") }

func (fs *billyFS) TempFile(dir, prefix string) (billy.File, error) {
	return nil, billy.ErrNotSupported
}

func (fs *billyFS) ReadDir(name string) ([]os.FileInfo, error) {
	ctx := context.Background()
	v := fs.b.v
	ino, err := fs.b.resolvePath(name)
	if err != nil {
		return nil, fail("readdir", name, err)
	}
	fh, err := v.OpenDir(ctx, ino)
	if err != nil {
		return nil, fail("readdir", name, err)
	}
	defer v.ReleaseDir(fh)
	var out []os.FileInfo
	for {
		ents, err := v.ReadDir(ctx, fh, len(out), true)
		if err != nil {
			return nil, fail("readdir", name, err)
		}
		if len(ents) == 0 {
			return out, nil
		}
		for _, e := range ents {
			a := e.Info
			if a.Ino == 0 {
				a = vfs.Attr{Ino: e.Ino, Type: e.Type}
			}
			out = append(out, &fileInfo{name: e.Name, a: a, v: v})
		}
	}
}

func (fs *billyFS) MkdirAll(name string, perm os.FileMode) error {
	dir, base, err := fs.b.resolveParent(name)
	if err != nil {
		return fail("mkdir", name, err)
	}
	_, err = fs.b.v.Mkdir(context.Background(), dir, base, uint32(perm.Perm()))
	return fail("mkdir", name, err)
}

func (fs *billyFS) Symlink(target, link string) error {
	dir, base, err := fs.b.resolveParent(link)
	if err != nil {
		return fail("symlink", link, err)
	}
	_, err = fs.b.v.Symlink(context.Background(), dir, base, target)
	return fail("symlink", link, err)
}

func (fs *billyFS) Readlink(link string) (string, error) {
	ino, err := fs.b.resolvePath(link)
	if err != nil {
		return "", fail("readlink", link, err)
	}
	t, err := fs.b.v.Readlink(context.Background(), ino)
	return t, fail("readlink", link, err)
}

func (fs *billyFS) Chroot(p string) (billy.Filesystem, error) { return nil, billy.ErrNotSupported }
func (fs *billyFS) Root() string                              { return "/" }

func (fs *billyFS) Capabilities() billy.Capability {
	if fs.b.v.ReadOnly() {
		return billy.ReadCapability | billy.SeekCapability
	}
	return billy.DefaultCapabilities &^ billy.LockCapability
}

// billy.Change and nfs.UnixChange.

func (fs *billyFS) setAttr(op, name string, r vfs.SetAttrReq) error {
	ino, err := fs.b.resolvePath(name)
	if err != nil {
		return fail(op, name, err)
	}
	_, err = fs.b.v.SetAttr(context.Background(), ino, r)
	return fail(op, name, err)
}

func (fs *billyFS) Chmod(name string, mode os.FileMode) error {
	m := client.UnixBits(mode)
	return fs.setAttr("chmod", name, vfs.SetAttrReq{Mode: &m})
}

func (fs *billyFS) Lchown(name string, uid, gid int) error {
	u, g := uint32(uid), uint32(gid)
	return fs.setAttr("chown", name, vfs.SetAttrReq{UID: &u, GID: &g})
}

func (fs *billyFS) Chown(name string, uid, gid int) error { return fs.Lchown(name, uid, gid) }

func (fs *billyFS) Chtimes(name string, atime, mtime time.Time) error {
	return fs.setAttr("utimes", name, vfs.SetAttrReq{Mtime: &mtime, Atime: &atime})
}

func (fs *billyFS) Mknod(p string, mode, major, minor uint32) error { return billy.ErrNotSupported }
func (fs *billyFS) Mkfifo(p string, mode uint32) error              { return billy.ErrNotSupported }
func (fs *billyFS) Socket(p string) error                           { return billy.ErrNotSupported }

// Link makes link another name of the file at p.
func (fs *billyFS) Link(p, link string) error {
	ino, err := fs.b.resolvePath(p)
	if err != nil {
		return fail("link", p, err)
	}
	dir, base, err := fs.b.resolveParent(link)
	if err != nil {
		return fail("link", link, err)
	}
	_, err = fs.b.v.Link(context.Background(), ino, dir, base)
	return fail("link", link, err)
}

var _ billy.Filesystem = (*billyFS)(nil)
var _ nfs.UnixChange = (*billyFS)(nil)

// ---- files

type file struct {
	fs   *billyFS
	name string
	ino  uint64
	fh   uint64
	pos  int64
}

func (f *file) Name() string { return f.name }

func (f *file) Write(p []byte) (int, error) {
	n, err := f.fs.b.v.Write(context.Background(), f.fh, p, f.pos)
	f.pos += int64(n)
	return n, fail("write", f.name, err)
}

func (f *file) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.fs.b.v.Read(context.Background(), f.fh, p, off)
	if err != nil {
		return n, fail("read", f.name, err)
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *file) Read(p []byte) (int, error) {
	n, err := f.ReadAt(p, f.pos)
	f.pos += int64(n)
	if err == io.EOF && n > 0 {
		err = nil
	}
	return n, err
}

func (f *file) Seek(off int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		off += f.pos
	case io.SeekEnd:
		a, err := f.fs.b.v.GetAttr(context.Background(), f.ino)
		if err != nil {
			return 0, fail("seek", f.name, err)
		}
		off += a.Size
	default:
		return 0, syscall.EINVAL
	}
	if off < 0 {
		return 0, syscall.EINVAL
	}
	f.pos = off
	return off, nil
}

// Close commits what was written (Durable unless the bridge is async).
func (f *file) Close() error {
	ctx := context.Background()
	err := f.fs.b.v.Flush(ctx, f.fh)
	if err2 := f.fs.b.v.Release(ctx, f.fh); err == nil {
		err = err2
	}
	return fail("close", f.name, err)
}

func (f *file) Lock() error   { return nil }
func (f *file) Unlock() error { return nil }

func (f *file) Truncate(size int64) error {
	_, err := f.fs.b.v.SetAttr(context.Background(), f.ino, vfs.SetAttrReq{Size: &size})
	return fail("truncate", f.name, err)
}
