package vfs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clientx"
)

// fileState is what this mount holds of one open regular file, shared by
// all its handles (as the kernel's page cache is shared by all
// descriptors): one transaction with the file open in it, begun at the
// first read or write after the file was opened, committed at flush
// (close) and fsync when it wrote something, aborted when the last handle
// is released.
type fileState struct {
	v   *VFS
	ino uint64
	// refs counts handles and operations using the state; guarded by
	// v.hmu. The state leaves v.states when it drops to zero.
	refs int
	// writers counts its handles open for writing (Writers); guarded by
	// v.hmu.
	writers int

	mu    sync.RWMutex // exclusive: changes below; shared: reads through f
	tx    *client.Txn
	f     *client.File
	dirty bool // written or truncated since the transaction began
	// pinned: the transaction must stay open, because the file may have
	// lost its last name (the namenode keeps an unlinked file for the
	// transactions that use it). Once such a transaction ends, the file
	// is gone for this mount too.
	pinned bool
	mtime  time.Time // of the last uncommitted write
	gone   bool      // could not be opened again: ErrStale
	attr   Attr      // attributes when pinned (shown once the file has no name)

	// redo lists the transaction's writes and size changes, to be made
	// again in a new transaction when the namenode loses this one (a
	// restart): up to maxRedo bytes of writes, beyond which redoFull is
	// set and losing the transaction loses them (EIO).
	redo      []change
	redoBytes int
	redoFull  bool
	// lostErr: uncommitted writes were lost (redoFull); every operation
	// fails with it until a commit (close, fsync) reports it.
	lostErr error
}

// change is a write (data at off) or, with data nil, a size change to off.
type change struct {
	off  int64
	data []byte
}

// maxRedo bounds the uncommitted writes a file keeps a copy of to make
// again after a namenode restart.
const maxRedo = 64 << 20

// state returns the open-file state of ino with a reference, or nil.
func (v *VFS) state(ino uint64) *fileState {
	v.hmu.Lock()
	defer v.hmu.Unlock()
	st := v.states[ino]
	if st != nil {
		st.refs++
	}
	return st
}

// acquire returns the open-file state of ino with a reference, creating
// it if needed.
func (v *VFS) acquire(ino uint64) *fileState {
	v.hmu.Lock()
	defer v.hmu.Unlock()
	st := v.states[ino]
	if st == nil {
		st = &fileState{v: v, ino: ino}
		v.states[ino] = st
	}
	st.refs++
	return st
}

// unref drops a reference; the last one ends the state's transaction
// (committing uncommitted data, as a last close would).
func (v *VFS) unref(st *fileState) error {
	v.hmu.Lock()
	st.refs--
	last := st.refs == 0
	v.hmu.Unlock()
	if !last {
		return nil
	}
	st.mu.Lock()
	err := st.end(context.Background())
	st.mu.Unlock()
	v.hmu.Lock()
	if st.refs == 0 && v.states[st.ino] == st {
		delete(v.states, st.ino)
	}
	v.hmu.Unlock()
	return err
}

// open makes sure the state has its transaction with the file open.
// Called with st.mu held exclusively.
func (st *fileState) open() error {
	if st.f != nil {
		return nil
	}
	if st.gone {
		return ErrStale
	}
	if st.lostErr != nil {
		return st.lostErr
	}
	tx := st.v.c.Begin()
	f, err := tx.OpenInode(st.v.bg, st.ino)
	if err != nil {
		tx.Abort(context.Background())
		if errors.Is(err, client.ErrNotFound) {
			if st.pinned {
				st.gone = true
			}
			return ErrStale
		}
		return err
	}
	for _, ch := range st.redo {
		if err := ch.apply(f); err != nil {
			tx.Abort(context.Background())
			return fmt.Errorf("making uncommitted writes again after the namenode lost them: %w", err)
		}
	}
	st.tx, st.f = tx, f
	return nil
}

func (ch change) apply(f *client.File) error {
	if ch.data == nil {
		return f.Truncate(ch.off)
	}
	_, err := f.WriteAt(ch.data, ch.off)
	return err
}

// record notes a change made in the transaction, for redoing it in a new
// one. Called with st.mu held exclusively.
func (st *fileState) record(ch change) {
	if st.redoFull {
		return
	}
	if ch.data != nil {
		ch.data = bytes.Clone(ch.data)
		st.redoBytes += len(ch.data)
	}
	st.redo = append(st.redo, ch)
	if st.redoBytes > maxRedo {
		st.redo, st.redoBytes, st.redoFull = nil, 0, true
	}
}

// forget ends what the state keeps of its transaction's changes (it
// committed, or was given up). Called with st.mu held exclusively.
func (st *fileState) forget() {
	st.dirty = false
	st.redo, st.redoBytes, st.redoFull = nil, 0, false
}

// lost reports whether err (of an operation in tx) comes from the
// namenode losing the transaction (a restart, a broken connection): the
// transaction is to be given up and its changes made again in a new one.
// (A namenode whose datanodes have not registered with it yet is waited
// for by the client itself: client.Config.AllocWait.)
func (st *fileState) lost(tx *client.Txn, err error) bool {
	if client.ConnLost(err) {
		return true
	}
	var answer *client.Error
	if errors.As(err, &answer) && !errors.Is(err, client.ErrTxn) {
		// The namenode answered (a conflict, say): that stands, whatever
		// happened to the connection since.
		return false
	}
	return tx != nil && clientx.Lost(tx)
}

// run opens the file (see open) and runs fn on it. When the namenode loses
// the transaction meanwhile (it restarted), the state waits for it, opens
// the file in a new transaction, makes the lost one's changes again and
// runs fn again, up to unreachableWait; fn must be safe to run again. A
// transaction whose changes were too many to keep (maxRedo) is not made
// again: the error is returned. Called with st.mu held exclusively.
func (st *fileState) run(ctx context.Context, fn func() error) error {
	var down time.Time
	for {
		err := st.open()
		tx := st.tx
		if err == nil {
			err = fn()
		}
		if err == nil || !st.lost(tx, err) || ctx.Err() != nil {
			return err
		}
		if st.dirty && st.redoFull {
			st.drop()
			st.lostErr = fmt.Errorf("uncommitted writes of inode %d (more than %d MiB since the last close or fsync) were lost with the namenode connection: %w", st.ino, maxRedo>>20, err)
			return st.lostErr
		}
		if down.IsZero() {
			down = time.Now()
		} else if time.Since(down) >= unreachableWait {
			return fmt.Errorf("namenode not reachable for %v: %w", unreachableWait, err)
		}
		st.drop()
		t := time.NewTimer(10*time.Millisecond + rand.N(10*time.Millisecond))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// drop gives up the state's transaction, which the namenode has lost;
// its changes stay recorded. Called with st.mu held exclusively.
func (st *fileState) drop() {
	if st.tx == nil {
		return
	}
	tx, f := st.tx, st.f
	st.tx, st.f = nil, nil
	f.Close()
	tx.Abort(context.Background())
}

// commit commits the state's transaction (durably if durable, else
// Async). Called with st.mu held exclusively. The next read or write
// begins a new transaction, which sees the latest committed data.
//
// A commit the namenode lost (or whose answer was lost: it may have been
// made) is made again in a new transaction: the same writes and size
// changes over the version committed since give the same file.
func (st *fileState) commit(ctx context.Context, durable bool) error {
	if st.tx == nil && !st.dirty {
		return nil
	}
	defer st.v.invalidate(st.ino)
	if err := st.lostErr; err != nil {
		st.lostErr = nil
		st.forget()
		return err
	}
	return st.run(ctx, func() error {
		tx, f := st.tx, st.f
		var err error
		if durable || st.v.opt.Sync {
			err = tx.Commit(ctx)
		} else {
			err = tx.CommitAsync(ctx)
		}
		// The commit wrote what the file buffered and attached it with
		// the commit itself (one round trip); the file is closed after.
		f.Close()
		st.tx, st.f = nil, nil
		if err == nil || !st.lost(tx, err) {
			st.forget()
		}
		return err
	})
}

// end ends the transaction: committed if it wrote, else aborted. Called
// with st.mu held exclusively.
func (st *fileState) end(ctx context.Context) error {
	if st.dirty {
		return st.commit(ctx, false)
	}
	if st.tx == nil {
		return nil
	}
	tx := st.tx
	st.f.Close()
	st.tx, st.f = nil, nil
	st.forget()
	tx.Abort(ctx)
	return nil
}

// pin commits uncommitted data and keeps a transaction holding the file,
// so that it stays readable after its last name is removed.
func (st *fileState) pin(ctx context.Context, a Attr) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.dirty {
		if err := st.commit(ctx, false); err != nil {
			return err
		}
	}
	if err := st.run(ctx, func() error { return nil }); err != nil {
		return err
	}
	st.pinned, st.attr = true, a
	return nil
}

func (st *fileState) truncate(ctx context.Context, size int64) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if err := st.truncateLocked(ctx, size); err != nil {
		return err
	}
	if st.v.opt.Sync {
		return st.commit(ctx, true)
	}
	return nil
}

// truncateLocked changes the size in the state's transaction. Called with
// st.mu held exclusively.
func (st *fileState) truncateLocked(ctx context.Context, size int64) error {
	if err := st.run(ctx, func() error { return st.f.Truncate(size) }); err != nil {
		return err
	}
	st.record(change{off: size})
	st.dirty, st.mtime = true, time.Now()
	return nil
}

// quiesce commits the uncommitted data of ino if it is open in this
// mount: an operation that changes the inode (chmod, link, …) would
// otherwise conflict with the file's own transaction.
func (v *VFS) quiesce(ctx context.Context, ino uint64) error {
	st := v.state(ino)
	if st == nil {
		return nil
	}
	defer v.unref(st)
	st.mu.Lock()
	defer st.mu.Unlock()
	if !st.dirty {
		return nil
	}
	return st.commit(ctx, false)
}

// pinnedAttr returns the attributes of a file open in this mount whose
// last name may be gone.
func (v *VFS) pinnedAttr(ino uint64) (Attr, bool) {
	st := v.state(ino)
	if st == nil {
		return Attr{}, false
	}
	defer v.unref(st)
	st.mu.RLock()
	defer st.mu.RUnlock()
	if !st.pinned || st.f == nil {
		return Attr{}, false
	}
	a := st.attr
	a.Nlink = 0
	a.Size = st.f.Size()
	if st.dirty {
		a.Mtime = st.mtime
		if a.Ctime.Before(st.mtime) {
			a.Ctime = st.mtime
		}
	}
	return a, true
}

// overlay puts the size and mtime of uncommitted writes into a.
func (v *VFS) overlay(a Attr) Attr {
	if a.Type != client.TypeFile {
		return a
	}
	if o, ok := v.openAttr(a.Ino); ok {
		a.Size = o.Size
		if !o.Mtime.IsZero() {
			// A write or truncate changes both times.
			a.Mtime = o.Mtime
			if a.Ctime.Before(o.Mtime) {
				a.Ctime = o.Mtime
			}
		}
	}
	return a
}

// openAttr returns what an open file's state knows of its attributes:
// the size its transaction sees and the time of the last uncommitted
// write.
func (v *VFS) openAttr(ino uint64) (Attr, bool) {
	st := v.state(ino)
	if st == nil {
		return Attr{}, false
	}
	defer v.unref(st)
	st.mu.RLock()
	defer st.mu.RUnlock()
	if st.f == nil || !st.dirty {
		return Attr{}, false
	}
	return Attr{Ino: ino, Type: client.TypeFile, Size: st.f.Size(), Mtime: st.mtime, Nlink: 0}, true
}

// ---- handles

// handle is an open file or directory.
type handle struct {
	ino    uint64
	st     *fileState // regular files
	append bool
	write  bool
	dir    *dirStream // directories
}

func (v *VFS) newHandle(h *handle) uint64 {
	v.hmu.Lock()
	defer v.hmu.Unlock()
	v.nextFH++
	v.handles[v.nextFH] = h
	if h.st != nil && h.write {
		h.st.writers++
	}
	return v.nextFH
}

func (v *VFS) handle(fh uint64) (*handle, error) {
	v.hmu.Lock()
	defer v.hmu.Unlock()
	h := v.handles[fh]
	if h == nil {
		return nil, syscall.EBADF
	}
	return h, nil
}

// Create creates the regular file name in dir (permission bits mode) and
// opens it with flags (os.O_*). Without O_EXCL an existing file is opened.
func (v *VFS) Create(ctx context.Context, dir uint64, name string, mode uint32, flags int) (Attr, uint64, error) {
	if err := v.writable(); err != nil {
		return Attr{}, 0, err
	}
	var a Attr
	var err error
	err = v.auto(ctx, func(tx *client.Txn) error {
		a, err = clientx.At(v.ownedBy(ctx, tx)).CreateAt(ctx, dir, name, client.CreateOptions{Mode: client.UnixMode(mode & 0o7777), Rep: v.opt.Rep})
		return err
	})
	if errors.Is(err, client.ErrExists) {
		v.names.note(dir, name)
	}
	// An exclusive create whose first attempt's answer was lost with the
	// namenode connection may have made the file it finds: it opens it.
	if errors.Is(err, client.ErrExists) && (flags&os.O_EXCL == 0 || errLostOutcome(err)) {
		if a, err = v.Lookup(ctx, dir, name); err != nil {
			return Attr{}, 0, err
		}
		switch a.Type {
		case client.TypeDir:
			return Attr{}, 0, syscall.EISDIR
		case client.TypeSymlink:
			return Attr{}, 0, syscall.ELOOP
		}
		fh, err := v.Open(ctx, a.Ino, flags)
		if err != nil {
			return Attr{}, 0, err
		}
		a, err = v.GetAttr(ctx, a.Ino)
		return a, fh, err
	}
	if err != nil {
		return Attr{}, 0, err
	}
	if mode&0o7777 == 0 { // CreateAt takes 0 for the default 0644
		if a, err = v.setMode(ctx, a.Ino, 0); err != nil {
			return Attr{}, 0, err
		}
	}
	v.created(dir, name, a)
	fh, err := v.Open(ctx, a.Ino, flags&^os.O_TRUNC)
	return a, fh, err
}

// Open opens regular file ino with flags (os.O_*: the access mode,
// O_APPEND, O_TRUNC) and returns a handle.
func (v *VFS) Open(ctx context.Context, ino uint64, flags int) (uint64, error) {
	write := flags&(os.O_WRONLY|os.O_RDWR) != 0
	if (write || flags&os.O_TRUNC != 0) && v.opt.ReadOnly {
		return 0, ErrReadOnly
	}
	st := v.acquire(ino)
	st.mu.Lock()
	var err error
	switch {
	case flags&os.O_TRUNC != 0 && write:
		var size int64
		if err = st.run(ctx, func() error { size = st.f.Size(); return nil }); err == nil && size != 0 {
			err = st.truncateLocked(ctx, 0)
		}
	case !st.dirty && !st.pinned && st.tx != nil:
		// Close-to-open consistency: a new open sees the latest
		// committed data, also while other handles are open.
		err = st.end(ctx)
	}
	if err == nil && st.f == nil && !st.pinned {
		// Open the inode now, not at the first read: if another client
		// removed it (renamed over its name, say) while this mount and
		// the kernel still cached the name's entry, the open answers
		// ESTALE, on which the kernel looks the name up again
		// (LOOKUP_REVAL) and opens what it names now; a read could only
		// fail with ESTALE.
		err = st.run(ctx, func() error { return nil })
		if err == nil {
			// Close-to-open consistency covers the size: attributes
			// cached before another client grew or shrank the file
			// would have the kernel read the new version only up to the
			// old end. The frontend has the kernel ask again after an
			// open (it drops the file's pages and attributes there).
			if a, ok := v.cachedAttr(ino); ok && a.Size != st.f.Size() {
				v.invalidate(ino)
			}
		}
	}
	st.mu.Unlock()
	if err != nil {
		if errors.Is(err, ErrStale) {
			// The lookup the kernel retries with must reach the namenode
			// (an entry whose inode has no cached attributes does).
			v.invalidate(ino)
		}
		v.unref(st)
		return 0, err
	}
	return v.newHandle(&handle{ino: ino, st: st, append: flags&os.O_APPEND != 0, write: write}), nil
}

// Read reads from file handle fh at off; it returns fewer bytes only at
// the end of the file.
func (v *VFS) Read(ctx context.Context, fh uint64, p []byte, off int64) (int, error) {
	h, err := v.handle(fh)
	if err != nil {
		return 0, err
	}
	if h.st == nil {
		return 0, syscall.EISDIR
	}
	return h.st.read(ctx, p, off)
}

func (st *fileState) read(ctx context.Context, p []byte, off int64) (int, error) {
	st.mu.RLock()
	short := false
	if st.f != nil {
		tx := st.tx
		n, err := st.f.ReadAt(p, off)
		st.mu.RUnlock()
		if err == io.EOF {
			err = nil
		}
		switch {
		case err == nil && n < len(p):
			// The end of the version this transaction reads. The kernel
			// asks only for bytes below the size GetAttr (from the
			// namenode) showed, which may be a newer, longer version
			// (appended through another mount); answered short, it would
			// fill the rest of the page with zeros that are nowhere in
			// the file. Read the latest version instead.
			short = true
		case err == nil || !st.lost(tx, err):
			return n, err
		}
	} else {
		st.mu.RUnlock()
	}
	// Not open yet, its transaction lost with the namenode, or a short
	// read from a clean one: open (again).
	st.mu.Lock()
	defer st.mu.Unlock()
	if short && !st.dirty && !st.pinned && st.tx != nil {
		if err := st.end(ctx); err != nil {
			return 0, err
		}
	}
	var n int
	err := st.run(ctx, func() error {
		var err error
		n, err = st.f.ReadAt(p, off)
		if err == io.EOF {
			err = nil
		}
		return err
	})
	return n, err
}

// Write writes p to file handle fh at off (at the end of the file for a
// handle opened with O_APPEND). The data is committed at Flush, Fsync or
// Release.
func (v *VFS) Write(ctx context.Context, fh uint64, p []byte, off int64) (int, error) {
	h, err := v.handle(fh)
	if err != nil {
		return 0, err
	}
	if h.st == nil {
		return 0, syscall.EISDIR
	}
	if v.opt.ReadOnly {
		return 0, ErrReadOnly
	}
	st := h.st
	st.mu.Lock()
	defer st.mu.Unlock()
	var n int
	err = st.run(ctx, func() error {
		if h.append {
			off = st.f.Size()
		}
		var err error
		n, err = st.f.WriteAt(p, off)
		return err
	})
	if n > 0 {
		st.record(change{off: off, data: p[:n]})
		st.dirty, st.mtime = true, time.Now()
	}
	if err == nil && v.opt.Sync && !v.opt.WriteBack {
		err = st.commit(ctx, true)
	}
	return n, err
}

// Flush is called at every close of a descriptor: uncommitted data of the
// file is committed (Async unless the mount is sync), so other clients
// see it once close returns. Nothing to commit costs nothing.
func (v *VFS) Flush(ctx context.Context, fh uint64) error {
	h, err := v.handle(fh)
	if err != nil || h.st == nil {
		return err
	}
	h.st.mu.Lock()
	defer h.st.mu.Unlock()
	if !h.st.dirty {
		return nil
	}
	return h.st.commit(ctx, false)
}

// Fsync commits the file's uncommitted data durably and returns once
// everything acknowledged before it (also metadata operations of this
// mount, which commit Async) is durable.
func (v *VFS) Fsync(ctx context.Context, fh uint64) error {
	h, err := v.handle(fh)
	if err != nil {
		return err
	}
	if h.st != nil {
		h.st.mu.Lock()
		dirty := h.st.dirty
		if dirty {
			err = h.st.commit(ctx, true)
		}
		h.st.mu.Unlock()
		if dirty {
			return err
		}
	}
	return v.syncNamenode(ctx)
}

// FsyncDir makes every metadata change acknowledged before it durable.
func (v *VFS) FsyncDir(ctx context.Context) error { return v.syncNamenode(ctx) }

// Release closes handle fh. The last handle of a file ends its
// transaction.
func (v *VFS) Release(ctx context.Context, fh uint64) error {
	v.hmu.Lock()
	h := v.handles[fh]
	delete(v.handles, fh)
	if h != nil && h.st != nil && h.write {
		h.st.writers--
	}
	v.hmu.Unlock()
	if h == nil {
		return syscall.EBADF
	}
	if h.st != nil {
		return v.unref(h.st)
	}
	return nil
}

// ---- directories

// dirStream is an open directory: the entries read so far, in name order,
// fetched a page at a time. Positions index this list, so they stay valid
// while the directory changes (a frontend's cookie is a position).
type dirStream struct {
	mu      sync.Mutex
	ino     uint64
	entries []client.DirEntry
	// epochs[i] is the VFS's invalidation count (attrEpoch) before
	// entries[i] was fetched (see ReadDir).
	epochs  []uint64
	more    bool
	started bool
	plus    bool
}

// OpenDir opens directory ino for reading.
func (v *VFS) OpenDir(ctx context.Context, ino uint64) (uint64, error) {
	return v.newHandle(&handle{ino: ino, dir: &dirStream{ino: ino, more: true}}), nil
}

// DirPage is how many entries a directory page asks the namenode for.
const DirPage = 1024

// refetchPage is how many entries a listing fetches again when the ones
// it had may be out of date (see ReadDir): about what one READDIRPLUS
// reply of the kernel holds.
const refetchPage = 64

// ReadDir returns the entries of directory handle fh from position pos
// on (at least one page, unless the directory ends). With plus the
// entries carry their attributes (and fill the caches). Reading position
// 0 again starts a fresh listing (rewinddir).
func (v *VFS) ReadDir(ctx context.Context, fh uint64, pos int, plus bool) ([]client.DirEntry, error) {
	h, err := v.handle(fh)
	if err != nil {
		return nil, err
	}
	if h.dir == nil {
		return nil, syscall.ENOTDIR
	}
	d := h.dir
	d.mu.Lock()
	defer d.mu.Unlock()
	if pos == 0 && d.started {
		d.entries, d.epochs, d.more = nil, nil, true
	}
	d.started = true
	if plus && !d.plus && len(d.entries) > 0 {
		// Attributes were not fetched so far: fetch from pos on again.
		d.cut(pos)
	}
	d.plus = d.plus || plus
	refetch := false
	if d.plus && pos < len(d.entries) && d.epochs[pos] != v.attrEpoch() {
		// Fetched by an earlier call, and this mount changed something
		// since (a write committed, a rename, …): the attributes, and the
		// inode a name stands for, may be old. A frontend hands them on
		// as current (the kernel takes READDIRPLUS attributes as fresh:
		// an old size cuts later reads of the file short), so the rest
		// of the listing is fetched again, after the last name handed
		// out; positions already handed out keep their meaning.
		d.cut(pos)
		refetch = true
	}
	for pos >= len(d.entries) && d.more {
		after := ""
		if len(d.entries) > 0 {
			after = d.entries[len(d.entries)-1].Name
		}
		epoch := v.attrEpoch()
		limit := DirPage
		if refetch {
			// What a frontend takes in one call, not a whole page: in a
			// mount that keeps changing, every call of a long listing
			// may fetch again.
			limit = refetchPage
		}
		var page []client.DirEntry
		var more bool
		err := v.auto(ctx, func(tx *client.Txn) error {
			page, more, err = clientx.At(tx).ReadDirPage(ctx, d.ino, after, limit, d.plus)
			return err
		})
		if err != nil {
			return nil, err
		}
		if len(page) == 0 {
			more = false
		}
		d.entries, d.more = append(d.entries, page...), more
		for range page {
			d.epochs = append(d.epochs, epoch)
		}
		if d.plus {
			for i := range page {
				v.putAttrSince(page[i].Info, epoch, true)
				v.putEntry(d.ino, page[i].Name, page[i].Ino)
			}
		}
	}
	if pos >= len(d.entries) {
		return nil, nil
	}
	out := d.entries[pos:]
	if d.plus {
		out = append([]client.DirEntry(nil), out...)
		for i := range out {
			out[i].Info = v.overlay(out[i].Info)
		}
	}
	return out, nil
}

// cut drops the entries from pos on, to be fetched again. Called with
// d.mu held.
func (d *dirStream) cut(pos int) {
	pos = min(pos, len(d.entries))
	d.entries, d.epochs, d.more = d.entries[:pos], d.epochs[:pos], true
}

// ReleaseDir closes directory handle fh.
func (v *VFS) ReleaseDir(fh uint64) {
	v.hmu.Lock()
	delete(v.handles, fh)
	v.hmu.Unlock()
}
