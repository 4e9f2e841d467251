// Package fusefs mounts PlasmaFS with FUSE (github.com/hanwen/go-fuse/v2,
// raw inode API): a thin adapter that turns kernel requests into calls of
// internal/vfs, which owns the file semantics. FUSE node ids are PlasmaFS
// inode numbers (never reused; the root is 1), so the adapter keeps no
// inode table and ignores FORGET.
//
// The mount is made with mount(2) directly (DirectMountStrict), so it
// needs root but not the fuse3 package's fusermount3.
package fusefs

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/vfs"
)

// Options shape a mount.
type Options struct {
	AllowOther bool // let other local users use the mount (with default_permissions)
	// DefaultPermissions makes the kernel check mode bits against the
	// caller's uid and gid (always on with AllowOther).
	DefaultPermissions bool
	Debug              bool
	FsName             string // shown in /proc/mounts (default "plasma")
	// OnOp, if set, is told of each main operation by name (metrics.go),
	// for metrics.
	OnOp func(op string)
}

// FS is the raw FUSE filesystem over a VFS.
type FS struct {
	fuse.RawFileSystem
	v     *vfs.VFS
	pages *pageCache // when the kernel drops its pages of a file
}

// New returns the FUSE filesystem over v.
func New(v *vfs.VFS) *FS {
	return &FS{RawFileSystem: fuse.NewDefaultRawFileSystem(), v: v, pages: newPageCache(v)}
}

// Mount mounts v on mountpoint and starts serving it. Wait on the
// returned server; Unmount it to stop.
func Mount(mountpoint string, v *vfs.VFS, o Options) (*fuse.Server, error) {
	mp, err := filepath.Abs(mountpoint)
	if err != nil {
		return nil, err
	}
	if o.FsName == "" {
		o.FsName = "plasma"
	}
	mo := &fuse.MountOptions{
		AllowOther:        o.AllowOther,
		FsName:            o.FsName,
		Name:              "plasma",
		Debug:             o.Debug,
		DirectMountStrict: true,
		MaxWrite:          1 << 20,
		MaxBackground:     64,
		// Reads are answered from memory (the client checks each block's
		// checksum there), never from a descriptor go-fuse could splice
		// from; left on, go-fuse tries a pipe for every READ reply first
		// (and for a 1 MiB reply fails and logs "trySplice: ... max pipe
		// size" each time) before it writes the bytes.
		DisableSplice: true,
		// O_TRUNC arrives with OPEN (handled in the file's transaction)
		// instead of as a separate SETATTR.
		ExtraCapabilities: fuse.CAP_ATOMIC_O_TRUNC,
		// The mount drops the kernel's cached pages of a file itself,
		// never while it has the file open for writing (pagecache.go).
		ExplicitDataCacheControl: true,
	}
	if o.AllowOther || o.DefaultPermissions {
		mo.Options = append(mo.Options, "default_permissions")
	}
	if v.ReadOnly() {
		mo.Options = append(mo.Options, "ro")
	}
	fsys := New(v)
	var raw fuse.RawFileSystem = fsys
	if o.OnOp != nil {
		raw = counted{raw, o.OnOp}
	}
	srv, err := fuse.NewServer(raw, mp, mo)
	if err != nil {
		return nil, err
	}
	fsys.pages.srv.Store(srv)
	go srv.Serve()
	if err := srv.WaitMount(); err != nil {
		srv.Unmount()
		return nil, err
	}
	setReadAhead(mp, readAheadKB)
	return srv, nil
}

// readAheadKB is the kernel read-ahead of a mount. The default for a FUSE
// mount, 128 KiB, keeps one sequential reader to one 128 KiB READ at a
// time; 4 MiB lets the kernel ask for the next megabytes while the
// current ones are copied out (a 1 GiB file read cold through the mount
// went from 661 to 1,100 MB/s here), and the client library reads blocks
// ahead behind it.
const readAheadKB = 4096

// setReadAhead sets the read-ahead of the mount at mp through its backing
// device's entry in /sys/class/bdi. Best effort: without it reads only
// come in smaller pieces.
func setReadAhead(mp string, kb int) {
	var st syscall.Stat_t
	if err := syscall.Stat(mp, &st); err != nil {
		return
	}
	dev := uint64(st.Dev)
	major, minor := (dev>>8)&0xfff|(dev>>32)&^0xfff, dev&0xff|(dev>>12)&^0xff
	path := fmt.Sprintf("/sys/class/bdi/%d:%d/read_ahead_kb", major, minor)
	os.WriteFile(path, []byte(fmt.Sprintf("%d\n", kb)), 0)
}

// String names the filesystem.
func (fs *FS) String() string { return "plasma" }

func ctx() context.Context { return context.Background() }

// callerCtx carries the request's sender: what it creates is its own.
func callerCtx(h *fuse.InHeader) context.Context {
	return vfs.WithCaller(context.Background(), vfs.Caller{UID: h.Uid, GID: h.Gid})
}

func status(err error) fuse.Status {
	e := vfs.Errno(err)
	if e == syscall.EIO {
		// The program sees only EIO: the mount's messages say why.
		log.Printf("plasma mount: input/output error: %v", err)
	}
	return fuse.Status(e)
}

// noID is the uid and gid the mount shows for an owner or group without
// a local id: no process has it, so the kernel's permission checks
// (default_permissions) never grant its owner's or group's rights, and
// stat shows it as the overflow id (65534, nobody). Shown as 65534
// itself, every process running as nobody would own all such files.
const noID = 1<<32 - 1

// ownerIDs are the local ids a's owner and group show as.
func (fs *FS) ownerIDs(a vfs.Attr) (uid, gid uint32) {
	uid, gid = fs.v.UID(a.User), fs.v.GID(a.Group)
	if uid == vfs.Nobody && a.User != fs.v.UserName(vfs.Nobody) {
		uid = noID
	}
	if gid == vfs.Nobody && a.Group != fs.v.GroupName(vfs.Nobody) {
		gid = noID
	}
	return uid, gid
}

func (fs *FS) fillAttr(a vfs.Attr, out *fuse.Attr) {
	*out = fuse.Attr{}
	out.Ino = a.Ino
	out.Size = uint64(a.Size)
	out.Blocks = (out.Size + 511) / 512
	out.Mode = vfs.UnixMode(a)
	out.Nlink = a.Nlink
	if out.Nlink == 0 && a.Type == client.TypeDir {
		out.Nlink = 2
	}
	out.Uid, out.Gid = fs.ownerIDs(a)
	mt, ct := a.Mtime, a.Ctime
	if ct.IsZero() {
		ct = mt
	}
	out.SetTimes(&mt, &mt, &ct)
	out.Rdev = uint32(a.Rdev)
	out.Blksize = uint32(a.Blocksize)
	if out.Blksize == 0 {
		out.Blksize = 4096
	}
}

func (fs *FS) fillEntry(a vfs.Attr, out *fuse.EntryOut) {
	fs.pages.show(a, true)
	out.NodeId = a.Ino
	out.Generation = 1
	ttl := fs.v.TTL()
	out.SetEntryTimeout(ttl)
	out.SetAttrTimeout(ttl)
	fs.fillAttr(a, &out.Attr)
}

func (fs *FS) fillAttrOut(a vfs.Attr, out *fuse.AttrOut) {
	fs.pages.show(a, false)
	out.SetTimeout(fs.v.TTL())
	fs.fillAttr(a, &out.Attr)
}

// Lookup answers LOOKUP. A name the mount knows is absent (a directory
// lease: no other client adds it meanwhile) is answered as a negative
// entry the kernel caches until shortly before the lease ends, so lookups
// of it again (a build probing include paths, a shell its PATH) stay in
// the kernel.
func (fs *FS) Lookup(cancel <-chan struct{}, h *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	a, err := fs.v.Lookup(ctx(), h.NodeId, name)
	if err != nil {
		if d, ok := fs.v.NegativeTimeout(err); ok {
			// Node id 0 with a timeout: a cached "no such name".
			*out = fuse.EntryOut{}
			out.SetEntryTimeout(d)
			return fuse.OK
		}
		return status(err)
	}
	fs.fillEntry(a, out)
	return fuse.OK
}

// Forget needs nothing but the page cache's note of what the kernel was
// shown of the inode: node ids are inode numbers.
func (fs *FS) Forget(nodeid, nlookup uint64) { fs.pages.forget(nodeid, nlookup) }

// GetAttr answers GETATTR.
func (fs *FS) GetAttr(cancel <-chan struct{}, in *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	a, err := fs.v.GetAttr(ctx(), in.NodeId)
	if err != nil {
		return status(err)
	}
	fs.fillAttrOut(a, out)
	return fuse.OK
}

// SetAttr answers SETATTR (mode, owner, size, times).
func (fs *FS) SetAttr(cancel <-chan struct{}, in *fuse.SetAttrIn, out *fuse.AttrOut) fuse.Status {
	var r vfs.SetAttrReq
	if m, ok := in.GetMode(); ok {
		r.Mode = &m
	}
	if u, ok := in.GetUID(); ok {
		r.UID = &u
	}
	if g, ok := in.GetGID(); ok {
		r.GID = &g
	}
	if s, ok := in.GetSize(); ok {
		sz := int64(s)
		r.Size = &sz
	}
	if t, ok := in.GetMTime(); ok {
		r.Mtime = &t
	}
	if t, ok := in.GetATime(); ok {
		r.Atime = &t
	}
	a, err := fs.v.SetAttr(ctx(), in.NodeId, r)
	if err != nil {
		return status(err)
	}
	fs.pages.note(a, false)
	out.SetTimeout(fs.v.TTL())
	fs.fillAttr(a, &out.Attr)
	return fuse.OK
}

// Mkdir answers MKDIR.
func (fs *FS) Mkdir(cancel <-chan struct{}, in *fuse.MkdirIn, name string, out *fuse.EntryOut) fuse.Status {
	a, err := fs.v.Mkdir(callerCtx(&in.InHeader), in.NodeId, name, in.Mode&0o7777)
	if err != nil {
		return status(err)
	}
	fs.fillEntry(a, out)
	return fuse.OK
}

// Unlink answers UNLINK.
func (fs *FS) Unlink(cancel <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	return status(fs.v.Unlink(ctx(), h.NodeId, name))
}

// Rmdir answers RMDIR.
func (fs *FS) Rmdir(cancel <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	return status(fs.v.Rmdir(ctx(), h.NodeId, name))
}

// Rename answers RENAME and RENAME2 (RENAME_NOREPLACE; not EXCHANGE).
func (fs *FS) Rename(cancel <-chan struct{}, in *fuse.RenameIn, oldName, newName string) fuse.Status {
	flags := in.Flags
	if in.Opcode == opRename {
		// Plain RENAME carries no flags; go-fuse may hand over stale
		// bytes of its buffer in the field.
		flags = 0
	}
	return status(fs.v.Rename(ctx(), in.NodeId, oldName, in.Newdir, newName, flags))
}

// opRename is FUSE_RENAME (renameat2 with flags uses FUSE_RENAME2).
const opRename = 12

// Link answers LINK.
func (fs *FS) Link(cancel <-chan struct{}, in *fuse.LinkIn, name string, out *fuse.EntryOut) fuse.Status {
	a, err := fs.v.Link(ctx(), in.Oldnodeid, in.NodeId, name)
	if err != nil {
		return status(err)
	}
	fs.fillEntry(a, out)
	return fuse.OK
}

// Symlink answers SYMLINK.
func (fs *FS) Symlink(cancel <-chan struct{}, h *fuse.InHeader, target, name string, out *fuse.EntryOut) fuse.Status {
	a, err := fs.v.Symlink(callerCtx(h), h.NodeId, name, target)
	if err != nil {
		return status(err)
	}
	fs.fillEntry(a, out)
	return fuse.OK
}

// Mknod answers MKNOD (FIFOs, sockets, device nodes; regular files).
func (fs *FS) Mknod(cancel <-chan struct{}, in *fuse.MknodIn, name string, out *fuse.EntryOut) fuse.Status {
	a, err := fs.v.Mknod(callerCtx(&in.InHeader), in.NodeId, name, in.Mode, uint64(in.Rdev))
	if err != nil {
		return status(err)
	}
	fs.fillEntry(a, out)
	return fuse.OK
}

// Readlink answers READLINK.
func (fs *FS) Readlink(cancel <-chan struct{}, h *fuse.InHeader) ([]byte, fuse.Status) {
	t, err := fs.v.Readlink(ctx(), h.NodeId)
	if err != nil {
		return nil, status(err)
	}
	return []byte(t), fuse.OK
}

// Access answers ACCESS (sent only without default_permissions).
func (fs *FS) Access(cancel <-chan struct{}, in *fuse.AccessIn) fuse.Status {
	return status(fs.v.Access(ctx(), in.NodeId, in.Mask, in.Uid, []uint32{in.Gid}))
}

// Create answers CREATE.
func (fs *FS) Create(cancel <-chan struct{}, in *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	a, fh, err := fs.v.Create(callerCtx(&in.InHeader), in.NodeId, name, in.Mode&0o7777, int(in.Flags))
	if err != nil {
		return status(err)
	}
	fs.pages.created(a, int(in.Flags)&syscall.O_ACCMODE != syscall.O_RDONLY)
	fs.fillEntry(a, &out.EntryOut)
	out.OpenOut.Fh = fh
	out.OpenOut.OpenFlags |= fuse.FOPEN_KEEP_CACHE
	return fuse.OK
}

// Open answers OPEN. The kernel's cached pages of the file are dropped
// at the open (close-to-open consistency with other clients) by the mount
// itself, unless it has the file open for writing (pagecache.go); the
// kernel is told to keep them (FOPEN_KEEP_CACHE). A read-only handle has nothing to commit at close, so the kernel is
// told not to send FLUSH for it (FOPEN_NOFLUSH, Linux 5.16+; older
// kernels ignore the flag): one request less per open of a file that is
// only read, as compilers do with every header.
func (fs *FS) Open(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	var fh uint64
	err := fs.pages.open(in.NodeId, func() (err error) {
		fh, err = fs.v.Open(ctx(), in.NodeId, int(in.Flags))
		return err
	})
	if err != nil {
		return status(err)
	}
	out.Fh = fh
	out.OpenFlags |= fuse.FOPEN_KEEP_CACHE
	if int(in.Flags)&syscall.O_ACCMODE == syscall.O_RDONLY {
		out.OpenFlags |= fuse.FOPEN_NOFLUSH
	}
	return fuse.OK
}

// Read answers READ, with the bytes the client holds in memory sent from
// there (readreply.go) and the rest read into buf.
func (fs *FS) Read(cancel <-chan struct{}, in *fuse.ReadIn, buf []byte) (fuse.ReadResult, fuse.Status) {
	bufs, n, release, err := fs.v.ReadShared(ctx(), in.Fh, buf[:min(len(buf), int(in.Size))], int64(in.Offset))
	if err != nil {
		release()
		return nil, status(err)
	}
	if n == 0 {
		// go-fuse writes an empty reply without calling Done.
		release()
		return fuse.ReadResultData(nil), fuse.OK
	}
	return &sharedReply{bufs: bufs, size: n, release: release}, fuse.OK
}

// Write answers WRITE.
func (fs *FS) Write(cancel <-chan struct{}, in *fuse.WriteIn, data []byte) (uint32, fuse.Status) {
	n, err := fs.v.Write(ctx(), in.Fh, data, int64(in.Offset))
	if err != nil {
		return uint32(n), status(err)
	}
	return uint32(n), fuse.OK
}

// Flush answers FLUSH (every close): commits the file's writes.
func (fs *FS) Flush(cancel <-chan struct{}, in *fuse.FlushIn) fuse.Status {
	return status(fs.v.Flush(ctx(), in.Fh))
}

// Fsync answers FSYNC: durable commit.
func (fs *FS) Fsync(cancel <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	return status(fs.v.Fsync(ctx(), in.Fh))
}

// Release answers RELEASE.
func (fs *FS) Release(cancel <-chan struct{}, in *fuse.ReleaseIn) {
	fs.v.Release(ctx(), in.Fh)
	fs.pages.released(in.NodeId, int(in.Flags)&syscall.O_ACCMODE != syscall.O_RDONLY)
}

// OpenDir answers OPENDIR.
func (fs *FS) OpenDir(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	a, err := fs.v.GetAttr(ctx(), in.NodeId)
	if err != nil {
		return status(err)
	}
	if !a.IsDir() {
		return fuse.ENOTDIR
	}
	fh, err := fs.v.OpenDir(ctx(), in.NodeId)
	if err != nil {
		return status(err)
	}
	out.Fh = fh
	return fuse.OK
}

// ReadDir answers READDIR.
func (fs *FS) ReadDir(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	return fs.readDir(in, out, false)
}

// ReadDirPlus answers READDIRPLUS.
func (fs *FS) ReadDirPlus(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	return fs.readDir(in, out, true)
}

func typeMode(t client.FileType) uint32 { return vfs.TypeMode(t) }

// readDir lists from offset in.Offset: 0 is ".", 1 "..", then the
// directory's entries in name order; an entry's offset is its position
// plus one.
func (fs *FS) readDir(in *fuse.ReadIn, out *fuse.DirEntryList, plus bool) fuse.Status {
	off := int(in.Offset)
	add := func(e fuse.DirEntry, a *vfs.Attr) bool {
		if !plus {
			return out.AddDirEntry(e)
		}
		eo := out.AddDirLookupEntry(e)
		if eo == nil {
			return false
		}
		if a != nil && a.Ino != 0 {
			fs.fillEntry(*a, eo)
		}
		return true
	}
	for ; off < 2; off++ {
		name, ino := ".", in.NodeId
		if off == 1 {
			name, ino = "..", fuse.FUSE_UNKNOWN_INO
		}
		if !add(fuse.DirEntry{Name: name, Ino: ino, Mode: syscall.S_IFDIR, Off: uint64(off + 1)}, nil) {
			return fuse.OK
		}
	}
	ents, err := fs.v.ReadDir(ctx(), in.Fh, off-2, plus)
	if err != nil {
		return status(err)
	}
	for i := range ents {
		e := fuse.DirEntry{Name: ents[i].Name, Ino: ents[i].Ino, Mode: typeMode(ents[i].Type), Off: uint64(off + i + 1)}
		if !add(e, &ents[i].Info) {
			break
		}
	}
	return fuse.OK
}

// ReleaseDir answers RELEASEDIR.
func (fs *FS) ReleaseDir(in *fuse.ReleaseIn) { fs.v.ReleaseDir(in.Fh) }

// FsyncDir answers FSYNCDIR: every earlier change is durable after it.
func (fs *FS) FsyncDir(cancel <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	return status(fs.v.FsyncDir(ctx()))
}

// StatFs answers STATFS.
func (fs *FS) StatFs(cancel <-chan struct{}, h *fuse.InHeader, out *fuse.StatfsOut) fuse.Status {
	s, err := fs.v.StatFS(ctx())
	if err != nil {
		return status(err)
	}
	*out = fuse.StatfsOut{Blocks: s.TotalBlocks, Bfree: s.FreeBlocks, Bavail: s.FreeBlocks, Files: s.Files + 1<<20,
		Ffree: 1 << 20, Bsize: s.Blocksize, Frsize: s.Blocksize, NameLen: 255}
	return fuse.OK
}

// Unmount unmounts mountpoint: umount(2), and with force a lazy detach
// when that fails (a mount whose server died, or is busy).
func Unmount(mountpoint string, force bool) error {
	mp, err := filepath.Abs(mountpoint)
	if err != nil {
		return err
	}
	err = syscall.Unmount(mp, 0)
	if err == nil || !force {
		if err != nil {
			return fmt.Errorf("%s: %w", mp, err)
		}
		return nil
	}
	if err2 := syscall.Unmount(mp, syscall.MNT_DETACH); err2 != nil {
		return fmt.Errorf("%s: %v; lazy unmount: %w", mp, err, err2)
	}
	return nil
}
