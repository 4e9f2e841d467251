package nfsbridge

import (
	"context"
	"crypto/rand"
	"errors"
	"os"
	"sync"
	"syscall"
	"time"

	nfs "github.com/willscott/go-nfs"

	"github.com/plasmafs/plasma/internal/vfs"
)

// The procedures the bridge answers itself instead of go-nfs (see the
// package comment for why): WRITE with UNSTABLE and COMMIT, LINK, REMOVE,
// RMDIR and RENAME with precise statuses, MOUNT's EXPORT, DUMP and
// UMNTALL, and the RPC-level errors for what nobody serves.
const (
	procWrite  = 7
	procRemove = 12
	procRmdir  = 13
	procRename = 14
	procLink   = 15
	procFSInfo = 19
	procCommit = 21

	mountProcDump    = 2
	mountProcUmntAll = 4
	mountProcExport  = 5

	// write stability (stable_how)
	unstable = 0
	fileSync = 2

	// unstableIdle: an UNSTABLE write's file is committed (not durably)
	// and closed after this long without another write or a COMMIT, so
	// that other PlasmaFS clients see the data even from an NFS client
	// that never commits.
	unstableIdle = 2 * time.Second
)

func (b *Bridge) route(h rpcCallHeader) procHandler {
	switch h.prog {
	case progNFS:
		if h.vers != 3 {
			return rejectWith(progMismatch)
		}
		switch h.proc {
		case procWrite:
			return b.nfsWrite
		case procCommit:
			return b.nfsCommit
		case procLink:
			return b.nfsLink
		case procRemove:
			return b.nfsRemove
		case procRmdir:
			return b.nfsRmdir
		case procRename:
			return b.nfsRename
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
	ino, _, err := decodeHandle(fh)
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

// ---- WRITE and COMMIT

// unstableFile is a file with UNSTABLE writes not yet committed: they sit
// in the VFS's open-file transaction (read back by every NFS client of
// this bridge) until COMMIT, a stable write or the idle timer commits it.
type unstableFile struct {
	fh    uint64
	timer *time.Timer
}

type unstableTable struct {
	mu    sync.Mutex
	files map[uint64]*unstableFile
	verf  [8]byte // changes at every start of the bridge (RFC 1813 writeverf3)
}

func newUnstableTable() *unstableTable {
	t := &unstableTable{files: map[uint64]*unstableFile{}}
	if _, err := rand.Read(t.verf[:]); err != nil {
		binVerf := time.Now().UnixNano()
		for i := range t.verf {
			t.verf[i] = byte(binVerf >> (8 * i))
		}
	}
	return t
}

// open returns the handle of ino's pending writes, opening it if needed;
// the idle timer is stopped until done is called.
func (b *Bridge) openUnstable(ctx context.Context, ino uint64) (*unstableFile, error) {
	t := b.unstable
	t.mu.Lock()
	defer t.mu.Unlock()
	if u := t.files[ino]; u != nil {
		u.timer.Stop()
		return u, nil
	}
	fh, err := b.v.Open(ctx, ino, os.O_RDWR)
	if err != nil {
		return nil, err
	}
	u := &unstableFile{fh: fh}
	u.timer = time.AfterFunc(time.Hour, func() { b.closeUnstable(context.Background(), ino, u, false) })
	u.timer.Stop()
	t.files[ino] = u
	return u, nil
}

// closeUnstable commits ino's pending writes (durably if durable) and
// releases its handle, if u is still ino's entry.
func (b *Bridge) closeUnstable(ctx context.Context, ino uint64, u *unstableFile, durable bool) error {
	t := b.unstable
	t.mu.Lock()
	if t.files[ino] != u {
		t.mu.Unlock()
		return nil
	}
	delete(t.files, ino)
	u.timer.Stop()
	t.mu.Unlock()
	var err error
	if durable {
		err = b.v.Fsync(ctx, u.fh)
	} else {
		err = b.v.Flush(ctx, u.fh)
	}
	if err2 := b.v.Release(ctx, u.fh); err == nil {
		err = err2
	}
	return err
}

func (b *Bridge) nfsWrite(args []byte) ([]byte, uint32) {
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
	ctx := context.Background()
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
	pre := nfs.ToFileAttribute(b.fs.info("", a), "")
	u, err := b.openUnstable(ctx, ino)
	if err != nil {
		return fail(err, pre, ino)
	}
	n, err := b.v.Write(ctx, u.fh, data, int64(off))
	if err != nil {
		b.closeUnstable(ctx, ino, u, false)
		return fail(err, pre, ino)
	}
	committed := uint32(unstable)
	switch {
	case how != unstable && !b.async:
		// DATA_SYNC and FILE_SYNC: durable before the reply.
		if err := b.closeUnstable(ctx, ino, u, true); err != nil {
			return fail(err, pre, ino)
		}
		committed = fileSync
	case how != unstable:
		// -async: committed (visible to every client) but not yet
		// durable, which the reply says; the client's COMMIT makes it so.
		if err := b.closeUnstable(ctx, ino, u, false); err != nil {
			return fail(err, pre, ino)
		}
	default:
		u.timer.Reset(unstableIdle)
	}
	e.u32(uint32(nfs.NFSStatusOk))
	nfs.WriteWcc(&e, preOp(pre), b.attrs(ctx, ino))
	e.u32(uint32(n))
	e.u32(committed)
	e.b = append(e.b, b.unstable.verf[:]...)
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
		b.unstable.mu.Lock()
		u := b.unstable.files[ino]
		if u != nil {
			u.timer.Stop()
		}
		b.unstable.mu.Unlock()
		if u != nil {
			err = b.closeUnstable(ctx, ino, u, true)
		} else {
			err = b.v.FsyncDir(ctx)
		}
	}
	if err != nil {
		e.u32(statusOf(err))
		nfs.WriteWcc(&e, nil, b.attrs(ctx, ino))
		return e.b, acceptSuccess
	}
	e.u32(uint32(nfs.NFSStatusOk))
	nfs.WriteWcc(&e, nil, b.attrs(ctx, ino))
	e.b = append(e.b, b.unstable.verf[:]...)
	return e.b, acceptSuccess
}

// flushUnstable commits every file's pending writes (at shutdown).
func (b *Bridge) flushUnstable(ctx context.Context) {
	b.unstable.mu.Lock()
	files := make(map[uint64]*unstableFile, len(b.unstable.files))
	for ino, u := range b.unstable.files {
		files[ino] = u
	}
	b.unstable.mu.Unlock()
	for ino, u := range files {
		b.closeUnstable(ctx, ino, u, false)
	}
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

func (b *Bridge) nfsLink(args []byte) ([]byte, uint32) {
	d := xdrDecoder{b: args}
	fh := d.opaque()
	dir, name, err := b.dirOp(&d)
	if errors.Is(err, errGarbage) {
		return nil, garbageArgs
	}
	ctx := context.Background()
	ino, ierr := b.inoOf(fh)
	if err == nil {
		err = ierr
	}
	pre := b.attrs(ctx, dir)
	if err == nil {
		if b.v.ReadOnly() {
			err = syscall.EROFS
		} else {
			_, err = b.v.Link(ctx, ino, dir, name)
		}
	}
	var e xdrEncoder
	e.u32(statusOf(err))
	nfs.WritePostOpAttrs(&e, b.attrs(ctx, ino))
	nfs.WriteWcc(&e, preOp(pre), b.attrs(ctx, dir))
	return e.b, acceptSuccess
}

func (b *Bridge) nfsRemove(args []byte) ([]byte, uint32) { return b.removeOp(args, false) }
func (b *Bridge) nfsRmdir(args []byte) ([]byte, uint32)  { return b.removeOp(args, true) }

func (b *Bridge) removeOp(args []byte, isDir bool) ([]byte, uint32) {
	d := xdrDecoder{b: args}
	dir, name, err := b.dirOp(&d)
	if errors.Is(err, errGarbage) {
		return nil, garbageArgs
	}
	ctx := context.Background()
	pre := b.attrs(ctx, dir)
	if err == nil && b.v.ReadOnly() {
		err = syscall.EROFS
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

func (b *Bridge) nfsRename(args []byte) ([]byte, uint32) {
	d := xdrDecoder{b: args}
	sdir, sname, err := b.dirOp(&d)
	ddir, dname, err2 := b.dirOp(&d)
	if errors.Is(err, errGarbage) || errors.Is(err2, errGarbage) {
		return nil, garbageArgs
	}
	if err == nil {
		err = err2
	}
	ctx := context.Background()
	spre, dpre := b.attrs(ctx, sdir), b.attrs(ctx, ddir)
	if err == nil && b.v.ReadOnly() {
		err = syscall.EROFS
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
