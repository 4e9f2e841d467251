package nfsbridge

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"log"
	"os"
	"sync"
	"syscall"
	"time"

	nfs "github.com/willscott/go-nfs"

	"github.com/plasmafs/plasma/client"

	"github.com/plasmafs/plasma/internal/vfs"
)

// The procedures the bridge answers itself instead of go-nfs (see the
// package comment for why): WRITE with UNSTABLE and COMMIT, LINK, REMOVE,
// RMDIR and RENAME with precise statuses, MOUNT's EXPORT, DUMP and
// UMNTALL, and the RPC-level errors for what nobody serves.
const (
	procSetAttr     = 2
	procRead        = 6
	procWrite       = 7
	procCreate      = 8
	procLookup      = 3
	procReadDir     = 16
	procReadDirPlus = 17
	procMkdir       = 9
	procSymlink     = 10
	procRemove      = 12
	procRmdir       = 13
	procRename      = 14
	procLink        = 15
	procFSInfo      = 19
	procCommit      = 21

	mountProcDump    = 2
	mountProcUmntAll = 4
	mountProcExport  = 5

	// write stability (stable_how)
	unstable = 0
	fileSync = 2

	// openIdle: a file the bridge holds open is committed and closed
	// after this long without a READ, WRITE or COMMIT: other PlasmaFS
	// clients see UNSTABLE writes of an NFS client that never commits,
	// and the bridge's reads see other clients' changes (like an
	// attribute cache's timeout).
	openIdle = time.Second
	// maxOpenFiles bounds the files held open (each may hold a few MiB
	// read ahead or written and not yet committed); past it a request
	// opens its file for itself and commits and closes it at the end.
	maxOpenFiles = 256
)

func (b *Bridge) route(h rpcCallHeader) procHandler {
	switch h.prog {
	case progNFS:
		if h.vers != 3 {
			return rejectWith(progMismatch)
		}
		switch h.proc {
		case procSetAttr:
			return b.bind(h, b.nfsSetAttr)
		case procCreate:
			return b.bind(h, b.nfsCreate)
		case procLookup:
			return b.bind(h, b.checkLookup)
		case procReadDir, procReadDirPlus:
			return b.bind(h, b.checkDir(mayRead))
		case procMkdir:
			return b.bind(h, b.nfsMkdir)
		case procSymlink:
			return b.bind(h, b.nfsSymlink)
		case procRead:
			return b.bind(h, b.nfsRead)
		case procWrite:
			return b.bind(h, b.nfsWrite)
		case procCommit:
			return b.nfsCommit
		case procLink:
			return b.bind(h, b.nfsLink)
		case procRemove:
			return b.bind(h, b.nfsRemove)
		case procRmdir:
			return b.bind(h, b.nfsRmdir)
		case procRename:
			return b.bind(h, b.nfsRename)
		case procFSInfo:
			return b.nfsFSInfo
		}
		if h.proc > procCommit {
			return rejectWith(procUnavail)
		}
		return nil
	case progMount:
		if h.vers != 3 {
			return rejectWith(progMismatch)
		}
		switch h.proc {
		case mountProcExport:
			return b.mountExport
		case mountProcDump:
			return func([]byte) ([]byte, uint32) { return []byte{0, 0, 0, 0}, acceptSuccess } // no mounts listed
		case mountProcUmntAll:
			return func([]byte) ([]byte, uint32) { return nil, acceptSuccess }
		}
		if h.proc > mountProcExport {
			return rejectWith(procUnavail)
		}
		return nil
	}
	return rejectWith(progUnavail)
}

// bind gives a handler the context of the call h.
func (b *Bridge) bind(h rpcCallHeader, f func(ctx context.Context, args []byte) ([]byte, uint32)) procHandler {
	return func(args []byte) ([]byte, uint32) { return f(b.callerCtx(h), args) }
}

// Access bits (as access(2) and vfs.Access take them).
const (
	mayRead  = 4
	mayWrite = 2
	mayExec  = 1
)

// checkDir is LOOKUP's (mask: search) and READDIR's (mask: read) check
// of an AUTH_UNIX caller's access to the directory, in front of go-nfs,
// which answers them with the bridge's rights: a refused call is
// answered with the status and the directory's attributes (the failure
// shape of all three), any other goes on to go-nfs.
func (b *Bridge) checkDir(mask uint32) func(ctx context.Context, args []byte) ([]byte, uint32) {
	return func(ctx context.Context, args []byte) ([]byte, uint32) {
		d := xdrDecoder{b: args}
		fh := d.opaque()
		if d.err != nil {
			return nil, acceptForward
		}
		dir, err := b.inoOf(fh)
		if err != nil {
			return nil, acceptForward
		}
		if err := b.access(ctx, dir, mask); err != nil {
			var e xdrEncoder
			e.u32(statusOf(err))
			nfs.WritePostOpAttrs(&e, b.attrs(ctx, dir))
			return e.b, acceptSuccess
		}
		return nil, acceptForward
	}
}

// checkLookup refuses LOOKUP of a name no entry can have ("/" or NUL in
// it): go-nfs joins the name into the path the bridge resolves, where
// "\x00" + digits names an inode (inoComponent) and "/" separates
// names, which would reach inodes outside the export or below
// directories the caller may not search. Others go on to checkDir.
func (b *Bridge) checkLookup(ctx context.Context, args []byte) ([]byte, uint32) {
	d := xdrDecoder{b: args}
	fh := d.opaque()
	name := d.opaque()
	if d.err == nil && bytes.ContainsAny(name, "/\x00") {
		dir, _ := b.inoOf(fh)
		var e xdrEncoder
		e.u32(uint32(nfs.NFSStatusNoEnt))
		nfs.WritePostOpAttrs(&e, b.attrs(ctx, dir))
		return e.b, acceptSuccess
	}
	return b.checkDir(mayExec)(ctx, args)
}

// mayChangeEntry checks that the caller may add or remove name in dir:
// write and search permission on dir, and in a sticky directory
// ownership of dir or of what name is (when it is there).
func (b *Bridge) mayChangeEntry(ctx context.Context, dir uint64, name string) error {
	if err := b.access(ctx, dir, mayWrite|mayExec); err != nil {
		return err
	}
	c := b.callerIn(ctx)
	if c.root() {
		return nil
	}
	da, err := b.v.GetAttr(ctx, dir)
	if err != nil || da.Mode&os.ModeSticky == 0 || b.owns(c, da) {
		return err
	}
	if a, err := b.v.Lookup(ctx, dir, name); err == nil && !b.owns(c, a) {
		return syscall.EACCES
	}
	return nil
}

// ownerOrRoot checks that the caller owns ino (or is root), as changing
// its mode or owner requires.
func (b *Bridge) ownerOrRoot(ctx context.Context, ino uint64) error {
	c := b.callerIn(ctx)
	if c.root() {
		return nil
	}
	a, err := b.v.GetAttr(ctx, ino)
	if err != nil {
		return err
	}
	if !b.owns(c, a) {
		return syscall.EPERM
	}
	return nil
}

// mayChown checks the owner and group sa gives ino, as chown(2) does:
// only root gives a file to another user; anyone else names only itself
// and its own group (the bridge knows only the caller's primary group),
// or leaves them as they are. The bridge's credential is usually a
// superuser's, which the namenode would let do anything.
func (b *Bridge) mayChown(ctx context.Context, ino uint64, sa sattr) error {
	c := b.callerIn(ctx)
	if c.root() {
		return nil
	}
	a, err := b.v.GetAttr(ctx, ino)
	if err != nil {
		return err
	}
	if sa.uid != nil && *sa.uid != c.uid && *sa.uid != b.v.UID(a.User) {
		return syscall.EPERM
	}
	if sa.gid != nil && *sa.gid != c.gid && *sa.gid != b.v.GID(a.Group) {
		return syscall.EPERM
	}
	return nil
}

func rejectWith(accept uint32) procHandler {
	return func([]byte) ([]byte, uint32) { return nil, accept }
}

// nfsStatus maps an error of the VFS to an NFSv3 status (RFC 1813
// nfsstat3; their numbers are not Linux's errnos past 31).
func nfsStatus(err error) uint32 {
	switch e := vfs.Errno(err); e {
	case 0:
		return uint32(nfs.NFSStatusOk)
	case syscall.EPERM:
		return uint32(nfs.NFSStatusPerm)
	case syscall.ENOENT:
		return uint32(nfs.NFSStatusNoEnt)
	case syscall.EACCES:
		return uint32(nfs.NFSStatusAccess)
	case syscall.EEXIST:
		return uint32(nfs.NFSStatusExist)
	case syscall.EXDEV:
		return uint32(nfs.NFSStatusXDev)
	case syscall.ENOTDIR:
		return uint32(nfs.NFSStatusNotDir)
	case syscall.EISDIR:
		return uint32(nfs.NFSStatusIsDir)
	case syscall.EINVAL:
		return uint32(nfs.NFSStatusInval)
	case syscall.EFBIG:
		return uint32(nfs.NFSStatusFBig)
	case syscall.ENOSPC:
		return uint32(nfs.NFSStatusNoSPC)
	case syscall.EROFS:
		return uint32(nfs.NFSStatusROFS)
	case syscall.EMLINK:
		return uint32(nfs.NFSStatusMlink)
	case syscall.ENAMETOOLONG:
		return uint32(nfs.NFSStatusNameTooLong)
	case syscall.ENOTEMPTY:
		return uint32(nfs.NFSStatusNotEmpty)
	case syscall.EDQUOT:
		return uint32(nfs.NFSStatusDQuot)
	case syscall.ESTALE:
		return uint32(nfs.NFSStatusStale)
	case syscall.EBUSY:
		// Another transaction holds the file: the client retries.
		return uint32(nfs.NFSStatusJukebox)
	case syscall.ENOTSUP:
		return uint32(nfs.NFSStatusNotSupp)
	default:
		return uint32(nfs.NFSStatusIO)
	}
}

var (
	errBadHandle = errors.New("not a PlasmaFS file handle")
	errGarbage   = errors.New("malformed arguments")
)

// inoOf returns the inode a handle names.
func (b *Bridge) inoOf(fh []byte) (uint64, error) {
	ino, _, err := b.decodeHandle(fh)
	if err != nil {
		return 0, errBadHandle
	}
	if ino == 0 {
		return 0, vfs.ErrStale
	}
	return ino, nil
}

func statusOf(err error) uint32 {
	if errors.Is(err, errBadHandle) {
		return uint32(nfs.NFSStatusBadHandle)
	}
	return nfsStatus(err)
}

// attrs returns the NFS attributes of ino, nil if it cannot be read
// (post_op_attr and wcc_data may omit them).
func (b *Bridge) attrs(ctx context.Context, ino uint64) *nfs.FileAttribute {
	if ino == 0 {
		return nil
	}
	a, err := b.v.GetAttr(ctx, ino)
	if err != nil {
		return nil
	}
	return nfs.ToFileAttribute(b.fs.info("", a), "")
}

func preOp(a *nfs.FileAttribute) *nfs.FileCacheAttribute {
	if a == nil {
		return nil
	}
	return a.AsCache()
}

// ---- READ, WRITE and COMMIT

// openFile is a file the bridge holds open between READs and WRITEs: each
// NFS request would otherwise open and close it, beginning and ending a
// transaction every time (go-nfs's own READ and WRITE do). UNSTABLE writes
// stay in it (in the VFS's open-file transaction, read back at once by
// every client of the bridge) until COMMIT, a stable write or the idle
// timer commits them.
type openFile struct {
	ino    uint64
	closed bool // released (idle, shut down, or a transient file done)
	// seq is the committed data version the file was opened at (0:
	// unknown, after a commit of ours); wrote says UNSTABLE writes are
	// pending. A READ that finds a newer version and no pending writes
	// opens the file again: a client polling a file sees other clients'
	// commits within the attribute cache's time, as with close-to-open.
	seq   uint64
	wrote bool
	fh    uint64
	busy  int // requests using fh; the idle timer runs only at 0
	timer *time.Timer
}

type openFiles struct {
	mu    sync.Mutex
	files map[uint64]*openFile
	// verf is the write verifier (RFC 1813 writeverf3): new at every start
	// of the bridge, and whenever writes answered UNSTABLE were lost.
	verf [8]byte
}

// verifier returns the current write verifier.
func (t *openFiles) verifier() [8]byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.verf
}

// newVerifier changes the write verifier: UNSTABLE writes acknowledged
// under the old one were lost (their commit failed), and clients, seeing
// another verifier at their COMMIT, send them again.
func (t *openFiles) newVerifier() {
	t.mu.Lock()
	defer t.mu.Unlock()
	old := t.verf
	for t.verf == old {
		if _, err := rand.Read(t.verf[:]); err != nil {
			binary.BigEndian.PutUint64(t.verf[:], binary.BigEndian.Uint64(old[:])+1)
		}
	}
}

func newOpenFiles() *openFiles {
	t := &openFiles{files: map[uint64]*openFile{}}
	if _, err := rand.Read(t.verf[:]); err != nil {
		now := time.Now().UnixNano()
		for i := range t.verf {
			t.verf[i] = byte(now >> (8 * i))
		}
	}
	return t
}

// useFile returns ino's open file, opening it if needed (seq: the file's
// committed data version as the request found it; write: the request
// writes); the caller calls doneFile when its request is answered.
func (b *Bridge) useFile(ctx context.Context, ino, seq uint64, write bool) (*openFile, error) {
	t := b.open
	t.mu.Lock()
	defer t.mu.Unlock()
	if f := t.files[ino]; f != nil {
		if write || f.wrote || f.busy > 0 || f.seq == seq {
			f.busy++
			f.wrote = f.wrote || write
			f.timer.Stop()
			return f, nil
		}
		// Another client committed a newer version: read that one.
		f.closed = true
		f.timer.Stop()
		delete(t.files, ino)
		go b.release(f)
	}
	transient := len(t.files) >= maxOpenFiles
	fh, err := b.v.Open(ctx, ino, os.O_RDWR)
	if e := vfs.Errno(err); e == syscall.EACCES || e == syscall.EPERM || e == syscall.EROFS {
		// Readable only: WRITEs through this handle fail as they should.
		fh, err = b.v.Open(ctx, ino, os.O_RDONLY)
	}
	if err != nil {
		return nil, err
	}
	f := &openFile{ino: ino, fh: fh, busy: 1, seq: seq, wrote: write}
	f.timer = time.AfterFunc(time.Hour, func() { b.closeIdle(ino, f) })
	f.timer.Stop()
	if !transient {
		t.files[ino] = f
	}
	return f, nil
}

// committed notes that f's writes are committed: no longer pending, and
// its version is new (the next READ opens it again to read it). A COMMIT
// with nothing written changes nothing.
func (b *Bridge) committed(f *openFile) {
	b.open.mu.Lock()
	defer b.open.mu.Unlock()
	if f.wrote {
		f.wrote, f.seq = false, 0
	}
}

func (b *Bridge) doneFile(f *openFile) {
	b.open.mu.Lock()
	f.busy--
	idle := f.busy == 0
	held := b.open.files[f.ino] == f
	if idle && held {
		f.timer.Reset(openIdle)
	}
	b.open.mu.Unlock()
	if idle && !held {
		b.closeIdle(f.ino, f) // a transient file
	}
}

// closeIdle commits what the file holds (durably if the bridge is not
// async) and closes it, unless a request uses it again.
func (b *Bridge) closeIdle(ino uint64, f *openFile) {
	t := b.open
	t.mu.Lock()
	if f.busy > 0 || f.closed {
		t.mu.Unlock()
		return
	}
	f.closed = true
	if t.files[ino] == f {
		delete(t.files, ino)
	}
	t.mu.Unlock()
	b.release(f)
}

// release commits what f holds and closes it.
func (b *Bridge) release(f *openFile) {
	ctx := context.Background()
	err := b.v.Flush(ctx, f.fh)
	if err2 := b.v.Release(ctx, f.fh); err == nil {
		err = err2
	}
	if err != nil {
		// Writes acknowledged as UNSTABLE are gone (e.g. another client
		// committed the file first): make their clients resend them.
		log.Printf("plasma nfs: committing inode %d failed, its unstable writes are lost (new write verifier): %v", f.ino, err)
		b.open.newVerifier()
	}
}

// closeAll commits and closes every open file (at shutdown).
func (b *Bridge) closeAll() {
	b.open.mu.Lock()
	files := make(map[uint64]*openFile, len(b.open.files))
	for ino, f := range b.open.files {
		files[ino] = f
		f.timer.Stop()
	}
	b.open.mu.Unlock()
	for ino, f := range files {
		b.closeIdle(ino, f)
	}
}

func (b *Bridge) nfsRead(ctx context.Context, args []byte) ([]byte, uint32) {
	d := xdrDecoder{b: args}
	fh := d.opaque()
	off := d.u64()
	count := d.u32()
	if d.err != nil {
		return nil, garbageArgs
	}
	var e xdrEncoder
	ino, err := b.inoOf(fh)
	var a vfs.Attr
	if err == nil {
		a, err = b.v.GetAttr(ctx, ino)
	}
	if err == nil && a.IsDir() {
		err = syscall.EISDIR
	}
	if err == nil {
		err = b.access(ctx, ino, mayRead)
	}
	if err != nil {
		e.u32(statusOf(err))
		nfs.WritePostOpAttrs(&e, b.attrs(ctx, ino))
		return e.b, acceptSuccess
	}
	count = min(count, transferSize)
	var buf []byte
	var n int
	if off < uint64(a.Size) {
		f, err := b.useFile(ctx, ino, a.Seq, false)
		if err == nil {
			buf = make([]byte, min(uint64(count), uint64(a.Size)-off))
			n, err = b.v.Read(ctx, f.fh, buf, int64(off))
			b.doneFile(f)
		}
		if err != nil && n == 0 {
			e.u32(statusOf(err))
			nfs.WritePostOpAttrs(&e, b.attrs(ctx, ino))
			return e.b, acceptSuccess
		}
	}
	post := b.attrs(ctx, ino)
	eof := post == nil || off+uint64(n) >= post.Filesize
	e.u32(uint32(nfs.NFSStatusOk))
	nfs.WritePostOpAttrs(&e, post)
	e.u32(uint32(n))
	if eof {
		e.u32(1)
	} else {
		e.u32(0)
	}
	e.opaque(buf[:n])
	return e.b, acceptSuccess
}

func (b *Bridge) nfsWrite(ctx context.Context, args []byte) ([]byte, uint32) {
	d := xdrDecoder{b: args}
	fh := d.opaque()
	off := d.u64()
	count := d.u32()
	how := d.u32()
	data := d.opaque()
	if d.err != nil || how > fileSync {
		return nil, garbageArgs
	}
	if int(count) < len(data) {
		data = data[:count]
	}
	var e xdrEncoder
	fail := func(err error, pre *nfs.FileAttribute, ino uint64) ([]byte, uint32) {
		e.u32(statusOf(err))
		nfs.WriteWcc(&e, preOp(pre), b.attrs(ctx, ino))
		return e.b, acceptSuccess
	}
	ino, err := b.inoOf(fh)
	if err != nil {
		return fail(err, nil, 0)
	}
	a, err := b.v.GetAttr(ctx, ino)
	switch {
	case err != nil:
		return fail(err, nil, 0)
	case a.IsDir():
		return fail(syscall.EISDIR, nil, ino)
	case b.v.ReadOnly():
		return fail(syscall.EROFS, nil, ino)
	case off > 1<<62:
		return fail(syscall.EFBIG, nil, ino)
	}
	if err := b.access(ctx, ino, mayWrite); err != nil {
		return fail(err, nil, ino)
	}
	pre := nfs.ToFileAttribute(b.fs.info("", a), "")
	f, err := b.useFile(ctx, ino, a.Seq, true)
	if err != nil {
		return fail(err, pre, ino)
	}
	defer b.doneFile(f)
	n, err := b.v.Write(ctx, f.fh, data, int64(off))
	if err != nil {
		return fail(err, pre, ino)
	}
	committed := uint32(unstable)
	switch {
	case how != unstable && !b.async:
		// DATA_SYNC and FILE_SYNC: durable before the reply.
		if err := b.v.Fsync(ctx, f.fh); err != nil {
			return fail(err, pre, ino)
		}
		b.committed(f)
		committed = fileSync
	case how != unstable:
		// -async: committed (visible to every client) but not yet
		// durable, which the reply says; the client's COMMIT makes it so.
		if err := b.v.Flush(ctx, f.fh); err != nil {
			return fail(err, pre, ino)
		}
		b.committed(f)
	}
	e.u32(uint32(nfs.NFSStatusOk))
	nfs.WriteWcc(&e, preOp(pre), b.attrs(ctx, ino))
	e.u32(uint32(n))
	e.u32(committed)
	verf := b.open.verifier()
	e.b = append(e.b, verf[:]...)
	return e.b, acceptSuccess
}

// nfsCommit makes the file's UNSTABLE writes durable, and with them
// everything acknowledged before (Client.Sync): a COMMIT is a barrier.
func (b *Bridge) nfsCommit(args []byte) ([]byte, uint32) {
	d := xdrDecoder{b: args}
	fh := d.opaque()
	d.u64() // offset and count: the whole file is committed
	d.u32()
	if d.err != nil {
		return nil, garbageArgs
	}
	ctx := context.Background()
	var e xdrEncoder
	ino, err := b.inoOf(fh)
	if err == nil {
		b.open.mu.Lock()
		f := b.open.files[ino]
		if f != nil {
			f.busy++
			f.timer.Stop()
		}
		b.open.mu.Unlock()
		if f != nil {
			if err = b.v.Fsync(ctx, f.fh); err == nil {
				b.committed(f)
			}
			b.doneFile(f)
		} else {
			err = b.v.FsyncDir(ctx)
		}
	}
	e.u32(statusOf(err))
	nfs.WriteWcc(&e, nil, b.attrs(ctx, ino))
	if err == nil {
		verf := b.open.verifier()
		e.b = append(e.b, verf[:]...)
	}
	return e.b, acceptSuccess
}

// ---- namespace procedures with precise statuses

// dirOp reads a diropargs3 (directory handle and name).
func (b *Bridge) dirOp(d *xdrDecoder) (dir uint64, name string, err error) {
	fh := d.opaque()
	name = string(d.opaque())
	if d.err != nil {
		return 0, "", errGarbage
	}
	if dir, err = b.inoOf(fh); err != nil {
		return 0, "", err
	}
	if name == "" || name == "." || name == ".." {
		return dir, name, syscall.EINVAL
	}
	return dir, name, nil
}

func (b *Bridge) nfsLink(ctx context.Context, args []byte) ([]byte, uint32) {
	d := xdrDecoder{b: args}
	fh := d.opaque()
	dir, name, err := b.dirOp(&d)
	if errors.Is(err, errGarbage) {
		return nil, garbageArgs
	}
	ino, ierr := b.inoOf(fh)
	if err == nil {
		err = ierr
	}
	pre := b.attrs(ctx, dir)
	if err == nil {
		if b.v.ReadOnly() {
			err = syscall.EROFS
		} else if err = b.mayChangeEntry(ctx, dir, name); err == nil {
			_, err = b.v.Link(ctx, ino, dir, name)
		}
	}
	var e xdrEncoder
	e.u32(statusOf(err))
	nfs.WritePostOpAttrs(&e, b.attrs(ctx, ino))
	nfs.WriteWcc(&e, preOp(pre), b.attrs(ctx, dir))
	return e.b, acceptSuccess
}

func (b *Bridge) nfsRemove(ctx context.Context, args []byte) ([]byte, uint32) {
	return b.removeOp(ctx, args, false)
}

func (b *Bridge) nfsRmdir(ctx context.Context, args []byte) ([]byte, uint32) {
	return b.removeOp(ctx, args, true)
}

func (b *Bridge) removeOp(ctx context.Context, args []byte, isDir bool) ([]byte, uint32) {
	d := xdrDecoder{b: args}
	dir, name, err := b.dirOp(&d)
	if errors.Is(err, errGarbage) {
		return nil, garbageArgs
	}
	pre := b.attrs(ctx, dir)
	if err == nil && b.v.ReadOnly() {
		err = syscall.EROFS
	}
	if err == nil {
		err = b.mayChangeEntry(ctx, dir, name)
	}
	if err == nil {
		if isDir {
			err = b.v.Rmdir(ctx, dir, name)
		} else {
			err = b.v.Unlink(ctx, dir, name)
		}
	}
	var e xdrEncoder
	e.u32(statusOf(err))
	nfs.WriteWcc(&e, preOp(pre), b.attrs(ctx, dir))
	return e.b, acceptSuccess
}

func (b *Bridge) nfsRename(ctx context.Context, args []byte) ([]byte, uint32) {
	d := xdrDecoder{b: args}
	sdir, sname, err := b.dirOp(&d)
	ddir, dname, err2 := b.dirOp(&d)
	if errors.Is(err, errGarbage) || errors.Is(err2, errGarbage) {
		return nil, garbageArgs
	}
	if err == nil {
		err = err2
	}
	spre, dpre := b.attrs(ctx, sdir), b.attrs(ctx, ddir)
	if err == nil && b.v.ReadOnly() {
		err = syscall.EROFS
	}
	if err == nil {
		err = b.mayChangeEntry(ctx, sdir, sname)
	}
	if err == nil {
		err = b.mayChangeEntry(ctx, ddir, dname)
	}
	if err == nil {
		err = b.v.Rename(ctx, sdir, sname, ddir, dname, 0)
	}
	var e xdrEncoder
	e.u32(statusOf(err))
	nfs.WriteWcc(&e, preOp(spre), b.attrs(ctx, sdir))
	nfs.WriteWcc(&e, preOp(dpre), b.attrs(ctx, ddir))
	return e.b, acceptSuccess
}

// transferSize is the READ and WRITE size the bridge advertises (go-nfs
// says 1 GiB, which a client may take at its word and the interceptor
// would refuse: a record is at most maxRecord). 1 MiB is also what the
// Linux client uses at most.
const transferSize = 1 << 20

// nfsFSInfo answers FSINFO with sizes the bridge accepts.
func (b *Bridge) nfsFSInfo(args []byte) ([]byte, uint32) {
	d := xdrDecoder{b: args}
	fh := d.opaque()
	if d.err != nil {
		return nil, garbageArgs
	}
	ctx := context.Background()
	var e xdrEncoder
	ino, err := b.inoOf(fh)
	var a *nfs.FileAttribute
	if err == nil {
		if a = b.attrs(ctx, ino); a == nil {
			err = vfs.ErrStale
		}
	}
	e.u32(statusOf(err))
	nfs.WritePostOpAttrs(&e, a)
	if err != nil {
		return e.b, acceptSuccess
	}
	e.u32(transferSize) // rtmax
	e.u32(transferSize) // rtpref
	e.u32(4096)         // rtmult
	e.u32(transferSize) // wtmax
	e.u32(transferSize) // wtpref
	e.u32(4096)         // wtmult
	e.u32(64 << 10)     // dtpref: a READDIR reply of this many bytes
	e.u32(1 << 30)      // maxfilesize: 2^62
	e.u32(0)
	e.u32(0) // time_delta: 1 ns
	e.u32(1)
	props := uint32(nfs.FSInfoPropertyLink | nfs.FSInfoPropertySymlink | nfs.FSInfoPropertyHomogeneous | nfs.FSInfoPropertyCanSetTime)
	e.u32(props)
	return e.b, acceptSuccess
}

// ---- CREATE and SETATTR

// sattr is an NFSv3 sattr3: the attributes a CREATE or SETATTR sets.
type sattr struct {
	mode, uid, gid *uint32
	size           *uint64
	atime, mtime   *time.Time
}

func readSattr(d *xdrDecoder) sattr {
	var s sattr
	opt32 := func() *uint32 {
		if d.u32() == 0 {
			return nil
		}
		v := d.u32()
		return &v
	}
	s.mode, s.uid, s.gid = opt32(), opt32(), opt32()
	if d.u32() != 0 {
		v := d.u64()
		s.size = &v
	}
	optTime := func() *time.Time {
		switch d.u32() {
		case 1: // SET_TO_SERVER_TIME
			t := time.Now()
			return &t
		case 2: // SET_TO_CLIENT_TIME
			sec, nsec := d.u32(), d.u32()
			t := time.Unix(int64(sec), int64(nsec))
			return &t
		}
		return nil
	}
	s.atime, s.mtime = optTime(), optTime()
	return s
}

// req turns s into a VFS attribute change (mode with its setuid, setgid
// and sticky bits, which go-nfs's own SETATTR drops).
func (s sattr) req(withMode bool) (vfs.SetAttrReq, bool) {
	var r vfs.SetAttrReq
	if s.mode != nil && withMode {
		m := *s.mode & 0o7777
		r.Mode = &m
	}
	r.UID, r.GID, r.Atime, r.Mtime = s.uid, s.gid, s.atime, s.mtime
	if s.size != nil {
		if *s.size > 1<<62 {
			n := int64(-1)
			r.Size = &n
		} else {
			n := int64(*s.size)
			r.Size = &n
		}
	}
	return r, r.Mode != nil || r.UID != nil || r.GID != nil || r.Size != nil || r.Mtime != nil
}

// CREATE modes (createmode3).
const (
	createUnchecked = 0
	createGuarded   = 1
	createExclusive = 2
)

// nfsCreate answers CREATE. go-nfs truncates an existing file on an
// UNCHECKED create (it opens with O_TRUNC) and refuses EXCLUSIVE ones,
// which O_EXCL creates of Linux clients use.
func (b *Bridge) nfsCreate(ctx context.Context, args []byte) ([]byte, uint32) {
	d := xdrDecoder{b: args}
	dir, name, err := b.dirOp(&d)
	how := d.u32()
	var sa sattr
	var verf []byte
	switch how {
	case createUnchecked, createGuarded:
		sa = readSattr(&d)
	case createExclusive:
		verf = d.fixed(8)
	default:
		return nil, garbageArgs
	}
	if d.err != nil || errors.Is(err, errGarbage) {
		return nil, garbageArgs
	}
	return b.newEntryReply(ctx, dir, err, func() (uint64, error) {
		if err := b.mayChangeEntry(ctx, dir, name); err != nil {
			return 0, err
		}
		return b.create(ctx, dir, name, how, sa, verf)
	})
}

// newEntryReply runs mk (unless err is set already or the bridge is
// read-only) and answers as CREATE, MKDIR and SYMLINK do: the status, the
// new entry's handle and attributes, the directory's before and after.
func (b *Bridge) newEntryReply(ctx context.Context, dir uint64, err error, mk func() (uint64, error)) ([]byte, uint32) {
	pre := b.attrs(ctx, dir)
	var ino uint64
	if err == nil {
		if b.v.ReadOnly() {
			err = syscall.EROFS
		} else {
			ino, err = mk()
		}
	}
	var e xdrEncoder
	e.u32(statusOf(err))
	if err == nil {
		e.u32(1) // handle follows
		e.opaque(b.encodeHandle(ino, dir))
		nfs.WritePostOpAttrs(&e, b.attrs(ctx, ino))
	}
	nfs.WriteWcc(&e, preOp(pre), b.attrs(ctx, dir))
	return e.b, acceptSuccess
}

// nfsMkdir answers MKDIR, so that the directory belongs to the caller.
func (b *Bridge) nfsMkdir(ctx context.Context, args []byte) ([]byte, uint32) {
	d := xdrDecoder{b: args}
	dir, name, err := b.dirOp(&d)
	sa := readSattr(&d)
	if d.err != nil || errors.Is(err, errGarbage) {
		return nil, garbageArgs
	}
	return b.newEntryReply(ctx, dir, err, func() (uint64, error) {
		if err := b.mayChangeEntry(ctx, dir, name); err != nil {
			return 0, err
		}
		mode := uint32(0o755)
		if sa.mode != nil {
			mode = *sa.mode & 0o7777
		}
		a, err := b.v.Mkdir(ctx, dir, name, mode)
		if err != nil {
			return 0, err
		}
		return a.Ino, b.applySattr(ctx, a.Ino, sa, false)
	})
}

// nfsSymlink answers SYMLINK, so that the link belongs to the caller.
func (b *Bridge) nfsSymlink(ctx context.Context, args []byte) ([]byte, uint32) {
	d := xdrDecoder{b: args}
	dir, name, err := b.dirOp(&d)
	readSattr(&d) // a symbolic link's own mode means nothing
	target := d.opaque()
	if d.err != nil || errors.Is(err, errGarbage) {
		return nil, garbageArgs
	}
	return b.newEntryReply(ctx, dir, err, func() (uint64, error) {
		if len(target) == 0 {
			return 0, syscall.EINVAL
		}
		if err := b.mayChangeEntry(ctx, dir, name); err != nil {
			return 0, err
		}
		a, err := b.v.Symlink(ctx, dir, name, string(target))
		return a.Ino, err
	})
}

// verfTime is how an EXCLUSIVE create's verifier is kept: as the new
// file's mtime (as knfsd does), which the client's SETATTR then replaces.
func verfTime(verf []byte) time.Time {
	return time.Unix(int64(binary.BigEndian.Uint32(verf)), int64(binary.BigEndian.Uint32(verf[4:])%1e9))
}

func (b *Bridge) create(ctx context.Context, dir uint64, name string, how uint32, sa sattr, verf []byte) (uint64, error) {
	if how == createUnchecked {
		// An existing file is kept, with only the size asked for (as
		// knfsd does): its mode and owner are its owner's to change,
		// and the caller may only be allowed to write in the directory.
		if a, err := b.v.Lookup(ctx, dir, name); err == nil {
			if a.Type != client.TypeFile {
				return 0, syscall.EEXIST
			}
			return a.Ino, b.applySattr(ctx, a.Ino, sattr{size: sa.size}, true)
		}
	}
	mode := uint32(0o644)
	if sa.mode != nil {
		mode = *sa.mode & 0o7777
	}
	if how == createExclusive {
		mode = 0o600
	}
	a, fh, err := b.v.Create(ctx, dir, name, mode, os.O_EXCL)
	if err == nil {
		err = b.v.Release(ctx, fh)
	}
	switch {
	case how == createExclusive && err == nil:
		t := verfTime(verf)
		_, err = b.v.SetAttr(ctx, a.Ino, vfs.SetAttrReq{Mtime: &t})
		return a.Ino, err
	case how == createExclusive && vfs.Errno(err) == syscall.EEXIST:
		// A retransmission of our own create succeeds.
		if a, lerr := b.v.Lookup(ctx, dir, name); lerr == nil && a.Type == client.TypeFile && a.Mtime.Equal(verfTime(verf)) {
			return a.Ino, nil
		}
		return 0, err
	case how == createUnchecked && vfs.Errno(err) == syscall.EEXIST:
		return b.create(ctx, dir, name, how, sa, verf) // created meanwhile
	case err != nil:
		return 0, err
	}
	return a.Ino, b.applySattr(ctx, a.Ino, sa, false)
}

// applySattr sets what sa asks of ino (its mode too with withMode), after
// a create that could not take it all, if the caller may.
func (b *Bridge) applySattr(ctx context.Context, ino uint64, sa sattr, withMode bool) error {
	if !withMode {
		sa.mode = nil
	}
	if err := b.maySetAttr(ctx, ino, sa); err != nil {
		return err
	}
	if r, any := sa.req(withMode); any {
		_, err := b.v.SetAttr(ctx, ino, r)
		return err
	}
	return nil
}

// nfsSetAttr answers SETATTR: with the setuid, setgid and sticky bits, a
// size change in the file the bridge holds open (if it does), and the
// ctime guard.
func (b *Bridge) nfsSetAttr(ctx context.Context, args []byte) ([]byte, uint32) {
	d := xdrDecoder{b: args}
	fh := d.opaque()
	sa := readSattr(&d)
	var guard *time.Time
	if d.u32() != 0 {
		sec, nsec := d.u32(), d.u32()
		t := time.Unix(int64(sec), int64(nsec))
		guard = &t
	}
	if d.err != nil {
		return nil, garbageArgs
	}
	var e xdrEncoder
	ino, err := b.inoOf(fh)
	var pre *nfs.FileAttribute
	if err == nil {
		pre = b.attrs(ctx, ino)
		switch r, _ := sa.req(true); {
		case pre == nil:
			err = vfs.ErrStale
		case guard != nil && (pre.Ctime.Seconds != uint32(guard.Unix()) || pre.Ctime.Nseconds != uint32(guard.Nanosecond())):
			e.u32(uint32(nfs.NFSStatusNotSync))
			nfs.WriteWcc(&e, preOp(pre), pre)
			return e.b, acceptSuccess
		case b.v.ReadOnly():
			err = syscall.EROFS
		case r.Size != nil && *r.Size < 0:
			err = syscall.EFBIG
		default:
			if err = b.maySetAttr(ctx, ino, sa); err == nil {
				_, err = b.v.SetAttr(ctx, ino, r)
			}
		}
	}
	e.u32(statusOf(err))
	nfs.WriteWcc(&e, preOp(pre), b.attrs(ctx, ino))
	return e.b, acceptSuccess
}

// maySetAttr checks the caller may make the changes sa asks of ino: mode
// and owner only by its owner (or root), size with write permission,
// times by the owner or with write permission.
func (b *Bridge) maySetAttr(ctx context.Context, ino uint64, sa sattr) error {
	if sa.mode != nil || sa.uid != nil || sa.gid != nil {
		if err := b.ownerOrRoot(ctx, ino); err != nil {
			return err
		}
	}
	if sa.uid != nil || sa.gid != nil {
		if err := b.mayChown(ctx, ino, sa); err != nil {
			return err
		}
	}
	if sa.size != nil {
		if err := b.access(ctx, ino, mayWrite); err != nil {
			return err
		}
	}
	if (sa.atime != nil || sa.mtime != nil) && b.ownerOrRoot(ctx, ino) != nil {
		return b.access(ctx, ino, mayWrite)
	}
	return nil
}

// ---- MOUNT

// mountExport lists the one export, "/" (MNT also accepts the exported
// PlasmaFS path), so that clients which list exports before mounting
// (libnfs by default) work.
func (b *Bridge) mountExport([]byte) ([]byte, uint32) {
	var e xdrEncoder
	e.u32(1) // an entry follows
	e.opaque([]byte("/"))
	e.u32(0) // no groups: everyone
	e.u32(0) // no more entries
	return e.b, acceptSuccess
}
