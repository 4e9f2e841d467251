package vfs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path"
	"sync"
	"syscall"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clientx"
)

// Options shape a VFS.
type Options struct {
	// ReadOnly refuses every change with EROFS.
	ReadOnly bool
	// Sync makes every operation durable before it returns: metadata
	// operations commit Durable, and every write and truncate of a file
	// commits its transaction durably at once (as O_SYNC).
	Sync bool
	// WriteBack leaves file writes in the open file's transaction even
	// with Sync, until Flush, Fsync or Release commits them: the NFS
	// bridge, whose WRITE (stable or not) and COMMIT say when data must be
	// durable.
	WriteBack bool
	// TTL is how long attributes and directory entries are cached
	// (default DefaultTTL; negative: not at all).
	TTL time.Duration
	// Rep is the replication of new files (0: the cluster default).
	Rep int
	// Owner, if set, shows the mount's own user and group as these
	// local ids (see Owner).
	Owner *Owner
}

// DefaultTTL is the default attribute and entry cache lifetime.
const DefaultTTL = time.Second

// RootIno is the inode number of the root directory.
const RootIno = 1

// Attr is an inode's attributes as a frontend shows them.
type Attr = client.FileInfo

// VFS maps inode + name operations onto a PlasmaFS client. Its methods
// are safe for concurrent use. See the package documentation for the
// semantics.
type VFS struct {
	c   *client.Client
	opt Options
	ids *idMap
	// bg is the context open files use for their I/O (a client.File
	// keeps the context it was opened with); cancelled by Close.
	bg     context.Context
	cancel context.CancelFunc

	names *dirNames // directories whose every name this mount knows
	scans *dirScans // directories whose names are looked up one after another

	cmu     sync.Mutex
	attrs   map[uint64]cachedAttr
	entries map[entryKey]cachedEntry
	// epoch counts invalidations (guarded by cmu): attributes of an inode
	// fetched while it was invalidated may predate the change the
	// invalidation announced, so they are neither cached nor answered
	// (see GetAttr).
	// Each cached inode keeps the epoch of its last invalidation, so an
	// invalidation of one inode does not send concurrent fetches of
	// others to the namenode again. pruned is the epoch of the last
	// pruning, which forgets those records: fetches begun before it
	// count as crossed by an invalidation.
	epoch  uint64
	pruned uint64

	hmu     sync.Mutex
	nextFH  uint64
	handles map[uint64]*handle
	states  map[uint64]*fileState
}

type cachedAttr struct {
	a   Attr
	exp time.Time
	// inval is the epoch of the inode's last invalidation. An
	// invalidated inode's entry stays (a.Ino 0, no attributes) to keep it.
	inval uint64
}

type entryKey struct {
	dir  uint64
	name string
}

type cachedEntry struct {
	ino uint64
	exp time.Time
}

// New returns a VFS over c. The caller keeps ownership of c; Close the
// VFS before closing c.
func New(c *client.Client, opt Options) *VFS {
	if opt.TTL == 0 {
		opt.TTL = DefaultTTL
	}
	bg, cancel := context.WithCancel(context.Background())
	return &VFS{c: c, opt: opt, ids: newIDMap(opt.Owner), bg: bg, cancel: cancel, names: newDirNames(c), scans: newDirScans(),
		attrs: map[uint64]cachedAttr{}, entries: map[entryKey]cachedEntry{},
		handles: map[uint64]*handle{}, states: map[uint64]*fileState{}}
}

// Client returns the client the VFS works with.
func (v *VFS) Client() *client.Client { return v.c }

// TTL returns the attribute and entry cache lifetime (0 if caching is
// off), which frontends also give the kernel or NFS clients.
func (v *VFS) TTL() time.Duration { return max(v.opt.TTL, 0) }

// ReadOnly reports whether the VFS refuses changes.
func (v *VFS) ReadOnly() bool { return v.opt.ReadOnly }

// Durable reports whether every operation is durable before it returns
// (Options.Sync).
func (v *VFS) Durable() bool { return v.opt.Sync }

// Close ends every open file: data not yet committed is committed (as at
// close), read transactions are aborted. The VFS is unusable afterwards.
func (v *VFS) Close() error {
	v.hmu.Lock()
	states := make([]*fileState, 0, len(v.states))
	for _, st := range v.states {
		states = append(states, st)
	}
	v.states = map[uint64]*fileState{}
	v.handles = map[uint64]*handle{}
	v.hmu.Unlock()
	var errs []error
	for _, st := range states {
		st.mu.Lock()
		errs = append(errs, st.end(context.Background()))
		st.mu.Unlock()
	}
	v.cancel()
	return errors.Join(errs...)
}

// ---- ownership

// UID and GID map PlasmaFS owner names to local ids; UserName and
// GroupName map back (see ids.go).
func (v *VFS) UID(name string) uint32 { return v.ids.UID(name) }

// GID maps a group name to a local group id.
func (v *VFS) GID(name string) uint32 { return v.ids.GID(name) }

// UserName maps a local user id to a PlasmaFS user name.
func (v *VFS) UserName(uid uint32) string { return v.ids.UserName(uid) }

// GroupName maps a local group id to a PlasmaFS group name.
func (v *VFS) GroupName(gid uint32) string { return v.ids.GroupName(gid) }

// ---- caches

func (v *VFS) putAttr(a Attr) { v.putAttrSince(a, 0, false) }

// attrEpoch returns the invalidation count, to be given to putAttrSince.
func (v *VFS) attrEpoch() uint64 {
	v.cmu.Lock()
	defer v.cmu.Unlock()
	return v.epoch
}

// changedSince reports whether inode ino was invalidated after epoch
// (attributes of it fetched since may predate the change).
func (v *VFS) changedSince(ino, epoch uint64) bool {
	v.cmu.Lock()
	defer v.cmu.Unlock()
	return v.changedSinceLocked(ino, epoch)
}

func (v *VFS) changedSinceLocked(ino, epoch uint64) bool {
	return v.pruned > epoch || v.attrs[ino].inval > epoch
}

// putAttrSince caches a unless, with checked set, a's inode was
// invalidated since epoch (a was fetched before, and may be what the
// change replaced).
func (v *VFS) putAttrSince(a Attr, epoch uint64, checked bool) {
	if v.opt.TTL <= 0 || a.Ino == 0 {
		return
	}
	v.cmu.Lock()
	if checked && v.changedSinceLocked(a.Ino, epoch) {
		v.cmu.Unlock()
		return
	}
	v.attrs[a.Ino] = cachedAttr{a, time.Now().Add(v.opt.TTL), v.attrs[a.Ino].inval}
	if len(v.attrs) > 1<<16 {
		v.pruneLocked()
	}
	v.cmu.Unlock()
}

func (v *VFS) putEntry(dir uint64, name string, ino uint64) {
	if v.opt.TTL <= 0 {
		return
	}
	v.cmu.Lock()
	v.entries[entryKey{dir, name}] = cachedEntry{ino, time.Now().Add(v.opt.TTL)}
	if len(v.entries) > 1<<16 {
		v.pruneLocked()
	}
	v.cmu.Unlock()
}

// pruneLocked drops expired cache entries (called with cmu held when a
// cache grows large).
func (v *VFS) pruneLocked() {
	now := time.Now()
	forgot := false // a record of an invalidation
	for k, e := range v.attrs {
		if now.After(e.exp) {
			forgot = forgot || e.inval != 0
			delete(v.attrs, k)
		}
	}
	if forgot {
		v.epoch++
		v.pruned = v.epoch
	}
	for k, e := range v.entries {
		if now.After(e.exp) {
			delete(v.entries, k)
		}
	}
}

func (v *VFS) cachedAttr(ino uint64) (Attr, bool) {
	v.cmu.Lock()
	defer v.cmu.Unlock()
	e, ok := v.attrs[ino]
	if !ok || e.a.Ino == 0 || time.Now().After(e.exp) {
		return Attr{}, false
	}
	return e.a, true
}

func (v *VFS) cachedEntry(dir uint64, name string) (uint64, bool) {
	v.cmu.Lock()
	defer v.cmu.Unlock()
	e, ok := v.entries[entryKey{dir, name}]
	if !ok || time.Now().After(e.exp) {
		return 0, false
	}
	return e.ino, true
}

// invalidate drops the cached attributes of inodes (changed by this
// mount).
func (v *VFS) invalidate(inos ...uint64) {
	v.cmu.Lock()
	v.epoch++
	for _, ino := range inos {
		if ino != 0 {
			v.attrs[ino] = cachedAttr{inval: v.epoch}
		}
	}
	if len(v.attrs) > 1<<16 {
		v.pruneLocked()
	}
	v.cmu.Unlock()
}

func (v *VFS) dropEntry(dir uint64, name string) {
	v.cmu.Lock()
	delete(v.entries, entryKey{dir, name})
	v.cmu.Unlock()
}

// ---- transactions

// durability of metadata commits.
func (v *VFS) durability() clientx.Durability {
	if v.opt.Sync {
		return clientx.Durable
	}
	return clientx.Async
}

// conflictRetries bounds how often a metadata operation that met another
// transaction's lock is tried again (with backoff up to 20ms: a few
// seconds in all) before it fails with EBUSY.
const conflictRetries = 200

// unreachableWait bounds how long an operation waits for a namenode it
// lost (one restarting: its supervisor's back-off, loading and replaying
// the log, the datanodes registering again) before it fails with EIO.
const unreachableWait = 30 * time.Second

// auto runs fn in a transaction that commits with its one request
// (clientx.Auto), again while it conflicts with another transaction, and
// while the namenode connection is lost (see waitNamenode): a namenode
// restart is waited out as an NFS hard mount would, not turned into
// errors.
func (v *VFS) auto(ctx context.Context, fn func(tx *client.Txn) error) error {
	return v.waitNamenode(ctx, func() error { return fn(clientx.Auto(v.c, v.durability())) })
}

// waitNamenode runs fn, again while it fails with another transaction's
// lock (up to conflictRetries times) or because the namenode connection
// was lost (client.ConnLost: a new connection is made by the next
// request), up to unreachableWait from the first loss; then the error is
// returned.
//
// fn must be safe to run again after a lost connection. A change whose
// request was sent when the connection broke may have been made: an
// attempt after it that finds the change done already (the name exists,
// or is gone) fails with an error that matches errLostOutcome, for the
// caller to judge.
func (v *VFS) waitNamenode(ctx context.Context, fn func() error) error {
	delay := 100 * time.Microsecond
	var down time.Time // when the namenode was first found unreachable
	conflicts := 0
	maybeDone := false // an attempt whose outcome is unknown was made
	for {
		err := fn()
		switch {
		case client.ConnLost(err) && ctx.Err() == nil:
			if down.IsZero() {
				down = time.Now()
			}
			if time.Since(down) >= unreachableWait {
				return fmt.Errorf("namenode not reachable for %v: %w", unreachableWait, err)
			}
			maybeDone = maybeDone || !client.Unreachable(err)
			delay = max(delay, 10*time.Millisecond)
		case errors.Is(err, client.ErrConflict) && conflicts < conflictRetries:
			conflicts++
		case maybeDone && (errors.Is(err, client.ErrExists) || errors.Is(err, client.ErrNotFound)):
			return &lostOutcomeError{err}
		default:
			return err
		}
		t := time.NewTimer(delay/2 + rand.N(delay/2+1))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		delay = min(2*delay, 20*time.Millisecond)
	}
}

// lostOutcomeError is an error of an attempt made after one whose outcome
// the lost namenode connection hid: the earlier one may have done what
// this one found done already.
type lostOutcomeError struct{ err error }

func (e *lostOutcomeError) Error() string { return e.err.Error() }
func (e *lostOutcomeError) Unwrap() error { return e.err }

// errLostOutcome reports whether err is a lostOutcomeError.
func errLostOutcome(err error) bool {
	var e *lostOutcomeError
	return errors.As(err, &e)
}

func (v *VFS) writable() error {
	if v.opt.ReadOnly {
		return ErrReadOnly
	}
	return nil
}

// ---- attributes and lookups

// GetAttr returns the attributes of inode ino (from the cache if fresh),
// with the size and mtime of this mount's uncommitted writes.
//
// A file of this mount being committed meanwhile (its size, no longer
// shown from its open state, not yet in the cache) would make attributes
// fetched before the commit look current: an append-only file would seem
// to shrink. So attributes fetched across an invalidation are fetched
// again (a few times; then the last ones are answered, not cached).
func (v *VFS) GetAttr(ctx context.Context, ino uint64) (Attr, error) {
	for try := 0; ; try++ {
		epoch := v.attrEpoch()
		a, ok := v.cachedAttr(ino)
		if !ok {
			var err error
			err = v.auto(ctx, func(tx *client.Txn) error {
				a, err = tx.StatInode(ctx, ino)
				return err
			})
			if err != nil {
				if errors.Is(err, client.ErrNotFound) {
					// An open file whose last name went keeps its attributes.
					if a, ok := v.pinnedAttr(ino); ok {
						return a, nil
					}
				}
				return Attr{}, err
			}
			v.putAttrSince(a, epoch, true)
		}
		out := v.overlay(a)
		if try == 3 || !v.changedSince(ino, epoch) {
			return out, nil
		}
	}
}

// Lookup returns the attributes of name in directory dir.
func (v *VFS) Lookup(ctx context.Context, dir uint64, name string) (Attr, error) {
	switch name {
	case ".":
		return v.GetAttr(ctx, dir)
	case "..":
		p, err := v.Parent(ctx, dir)
		if err != nil {
			return Attr{}, err
		}
		return v.GetAttr(ctx, p)
	}
	epoch := v.attrEpoch()
	if ino, ok := v.cachedEntry(dir, name); ok {
		if a, ok := v.cachedAttr(ino); ok {
			if out := v.overlay(a); !v.changedSince(ino, epoch) {
				return out, nil
			}
			return v.GetAttr(ctx, ino) // fetched across an invalidation
		}
	}
	if until, ok := v.names.absent(ctx, dir, name); ok {
		return Attr{}, &AbsentError{Name: name, Until: until}
	}
	var a Attr
	var err error
	err = v.auto(ctx, func(tx *client.Txn) error {
		a, err = clientx.At(tx).LookupAt(ctx, dir, name)
		return err
	})
	if errors.Is(err, client.ErrNotFound) {
		v.names.missed(ctx, dir)
	}
	if err != nil {
		return Attr{}, err
	}
	v.putAttrSince(a, epoch, true)
	v.putEntry(dir, name, a.Ino)
	v.names.note(dir, name)
	v.scanAfter(ctx, dir, name)
	if out := v.overlay(a); !v.changedSince(a.Ino, epoch) {
		return out, nil
	}
	return v.GetAttr(ctx, a.Ino) // fetched across an invalidation
}

// Parent returns the inode of directory dir's parent (the root's is the
// root).
func (v *VFS) Parent(ctx context.Context, dir uint64) (uint64, error) {
	if dir == RootIno {
		return RootIno, nil
	}
	p, err := v.PathOf(ctx, dir)
	if err != nil {
		return 0, err
	}
	var a Attr
	err = v.auto(ctx, func(tx *client.Txn) error {
		a, err = tx.Lstat(ctx, path.Dir(p))
		return err
	})
	return a.Ino, err
}

// PathOf returns a path of inode ino.
func (v *VFS) PathOf(ctx context.Context, ino uint64) (string, error) {
	var p string
	var err error
	err = v.auto(ctx, func(tx *client.Txn) error {
		p, err = clientx.At(tx).PathOf(ctx, ino)
		return err
	})
	return p, err
}

// LookupPath resolves an absolute path (symbolic links in it are
// followed, a final one is not).
func (v *VFS) LookupPath(ctx context.Context, p string) (Attr, error) {
	var a Attr
	var err error
	err = v.auto(ctx, func(tx *client.Txn) error {
		a, err = tx.Lstat(ctx, p)
		return err
	})
	if err != nil {
		return Attr{}, err
	}
	v.putAttr(a)
	return v.overlay(a), nil
}

// SetAttrReq lists attribute changes; nil fields are left alone.
type SetAttrReq struct {
	Mode  *uint32 // Unix permission bits (07777)
	UID   *uint32
	GID   *uint32
	Size  *int64
	Mtime *time.Time
	Atime *time.Time // accepted and ignored: PlasmaFS keeps no atime
}

// SetAttr changes attributes of inode ino. A size change of a file open
// in this mount happens in its open transaction (committed with its
// data); other changes commit at once, after the file's uncommitted data.
func (v *VFS) SetAttr(ctx context.Context, ino uint64, r SetAttrReq) (Attr, error) {
	if err := v.writable(); err != nil {
		return Attr{}, err
	}
	var s client.SetAttr
	if r.Mode != nil {
		m := client.UnixMode(*r.Mode & 0o7777)
		s.Mode = &m
	}
	if r.UID != nil {
		u := v.ids.UserName(*r.UID)
		s.User = &u
	}
	if r.GID != nil {
		g := v.ids.GroupName(*r.GID)
		s.Group = &g
	}
	s.Mtime = r.Mtime
	other := s.Mode != nil || s.User != nil || s.Group != nil || s.Mtime != nil
	if r.Size != nil {
		if *r.Size < 0 {
			return Attr{}, syscall.EINVAL
		}
		// Always through a file in a transaction: it rewrites a partial
		// last block zeroed, so a later extension reads zeros (a bare
		// SetAttr size keeps the old bytes past the new end).
		st := v.acquire(ino)
		err := st.truncate(ctx, *r.Size)
		if err2 := v.unref(st); err == nil {
			err = err2
		}
		if err != nil {
			return Attr{}, err
		}
	}
	if !other {
		return v.GetAttr(ctx, ino)
	}
	// The file's own open transaction holds its inode: commit it first.
	if err := v.quiesce(ctx, ino); err != nil {
		return Attr{}, err
	}
	var a Attr
	var err error
	err = v.auto(ctx, func(tx *client.Txn) error {
		a, err = tx.SetAttr(ctx, ino, s)
		return err
	})
	if err != nil {
		return Attr{}, err
	}
	// Attributes fetched before the change (a lookup, a listing) must not
	// replace these when they arrive.
	v.invalidate(ino)
	v.putAttr(a)
	return v.overlay(a), nil
}

// Access checks whether a caller (uid, gids) may access inode ino with
// mask (R_OK 4, W_OK 2, X_OK 1; 0 checks existence), from the mode bits.
// The namenode checks again with the mount's credential.
func (v *VFS) Access(ctx context.Context, ino uint64, mask uint32, uid uint32, gids []uint32) error {
	a, err := v.GetAttr(ctx, ino)
	if err != nil {
		return err
	}
	if mask&2 != 0 && v.opt.ReadOnly {
		return ErrReadOnly
	}
	perm := uint32(a.Mode.Perm())
	if uid == 0 {
		if mask&1 != 0 && !a.IsDir() && perm&0o111 == 0 {
			return syscall.EACCES
		}
		return nil
	}
	var bits uint32
	switch {
	case uid == v.ids.UID(a.User):
		bits = perm >> 6
	case inGroups(v.ids.GID(a.Group), gids):
		bits = perm >> 3
	default:
		bits = perm
	}
	if mask&7&^bits != 0 {
		return syscall.EACCES
	}
	return nil
}

func inGroups(g uint32, gids []uint32) bool {
	for _, x := range gids {
		if x == g {
			return true
		}
	}
	return false
}

// ---- owners of new names

// Caller is the local user an operation is done for (a FUSE request's
// sender). New files, directories and links belong to it when the mount's
// credential is a superuser's, which the namenode requires for creating
// for another owner; the kernel has already checked the caller's
// permissions (default_permissions, always on with allow_other).
type Caller struct{ UID, GID uint32 }

type callerKey struct{}

// WithCaller returns ctx carrying the caller of an operation.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// ownedBy makes tx create for ctx's caller, if it carries one: the
// caller's user and group (the namenode gives what is created in a setgid
// directory that directory's group).
func (v *VFS) ownedBy(ctx context.Context, tx *client.Txn) *client.Txn {
	c, ok := ctx.Value(callerKey{}).(Caller)
	if !ok {
		return tx
	}
	return clientx.CreateAs(tx, v.ids.UserName(c.UID), v.ids.GroupName(c.GID))
}

// ---- namespace

// Mkdir creates directory name in dir with permission bits mode.
func (v *VFS) Mkdir(ctx context.Context, dir uint64, name string, mode uint32) (Attr, error) {
	if err := v.writable(); err != nil {
		return Attr{}, err
	}
	var a Attr
	var err error
	m := mode & 0o7777
	err = v.auto(ctx, func(tx *client.Txn) error {
		a, err = clientx.At(v.ownedBy(ctx, tx)).MkdirAt(ctx, dir, name, client.UnixMode(m))
		return err
	})
	if errLostOutcome(err) {
		a, err = v.madeAlready(ctx, dir, name, err, func(a Attr) bool { return a.IsDir() })
	}
	if err != nil {
		return Attr{}, err
	}
	if m == 0 { // MkdirAt takes 0 for the default 0755; setgid stays (inherited)
		if a, err = v.setMode(ctx, a.Ino, UnixMode(a)&syscall.S_ISGID); err != nil {
			return Attr{}, err
		}
	}
	v.created(dir, name, a)
	return a, nil
}

func (v *VFS) setMode(ctx context.Context, ino uint64, mode uint32) (Attr, error) {
	m := client.UnixMode(mode)
	var a Attr
	var err error
	err = v.auto(ctx, func(tx *client.Txn) error {
		a, err = tx.SetAttr(ctx, ino, client.SetAttr{Mode: &m})
		return err
	})
	return a, err
}

// madeAlready returns the attributes of name in dir if they pass made:
// the name an attempt whose answer was lost made (err, the error of the
// attempt after it, otherwise).
func (v *VFS) madeAlready(ctx context.Context, dir uint64, name string, err error, made func(Attr) bool) (Attr, error) {
	v.dropEntry(dir, name)
	var a Attr
	lerr := v.auto(ctx, func(tx *client.Txn) error {
		var err error
		a, err = clientx.At(tx).LookupAt(ctx, dir, name)
		return err
	})
	if lerr != nil || !made(a) {
		return Attr{}, err
	}
	return a, nil
}

// created records a new name in the caches.
func (v *VFS) created(dir uint64, name string, a Attr) {
	v.names.note(dir, name)
	v.invalidate(dir)
	v.putAttr(a)
	v.putEntry(dir, name, a.Ino)
}

// Symlink creates the symbolic link name in dir pointing to target.
func (v *VFS) Symlink(ctx context.Context, dir uint64, name, target string) (Attr, error) {
	if err := v.writable(); err != nil {
		return Attr{}, err
	}
	var a Attr
	var err error
	err = v.auto(ctx, func(tx *client.Txn) error {
		a, err = clientx.At(v.ownedBy(ctx, tx)).SymlinkAt(ctx, target, dir, name)
		return err
	})
	if errLostOutcome(err) {
		a, err = v.madeAlready(ctx, dir, name, err, func(a Attr) bool { return a.Type == client.TypeSymlink && a.Target == target })
	}
	if err != nil {
		return Attr{}, err
	}
	v.created(dir, name, a)
	return a, nil
}

// Mknod creates a FIFO, a socket or a device node (mode holds the
// S_IFMT type and the permission bits; rdev the device number).
func (v *VFS) Mknod(ctx context.Context, dir uint64, name string, mode uint32, rdev uint64) (Attr, error) {
	if err := v.writable(); err != nil {
		return Attr{}, err
	}
	var typ client.FileType
	switch mode & syscall.S_IFMT {
	case syscall.S_IFIFO:
		typ = client.TypeFIFO
	case syscall.S_IFSOCK:
		typ = client.TypeSocket
	case syscall.S_IFCHR:
		typ = client.TypeCharDevice
	case syscall.S_IFBLK:
		typ = client.TypeBlockDevice
	case syscall.S_IFREG, 0:
		a, fh, err := v.Create(ctx, dir, name, mode&0o7777, os.O_EXCL)
		if err == nil {
			err = v.Release(ctx, fh)
		}
		return a, err
	default:
		return Attr{}, syscall.EINVAL
	}
	var a Attr
	var err error
	err = v.auto(ctx, func(tx *client.Txn) error {
		a, err = clientx.At(v.ownedBy(ctx, tx)).MknodAt(ctx, dir, name, typ, client.UnixMode(mode&0o7777), rdev)
		return err
	})
	if errLostOutcome(err) {
		a, err = v.madeAlready(ctx, dir, name, err, func(a Attr) bool { return a.Type == typ && a.Rdev == rdev })
	}
	if err != nil {
		return Attr{}, err
	}
	v.created(dir, name, a)
	return a, nil
}

// Readlink returns the target of symbolic link ino.
func (v *VFS) Readlink(ctx context.Context, ino uint64) (string, error) {
	a, err := v.GetAttr(ctx, ino)
	if err != nil {
		return "", err
	}
	if a.Type != client.TypeSymlink {
		return "", syscall.EINVAL
	}
	return a.Target, nil
}

// Link makes name in dir another name of inode ino.
func (v *VFS) Link(ctx context.Context, ino, dir uint64, name string) (Attr, error) {
	if err := v.writable(); err != nil {
		return Attr{}, err
	}
	if err := v.quiesce(ctx, ino); err != nil {
		return Attr{}, err
	}
	var a Attr
	var err error
	err = v.auto(ctx, func(tx *client.Txn) error {
		a, err = clientx.At(tx).LinkAt(ctx, ino, dir, name)
		return err
	})
	if errLostOutcome(err) {
		a, err = v.madeAlready(ctx, dir, name, err, func(a Attr) bool { return a.Ino == ino })
	}
	if err != nil {
		return Attr{}, err
	}
	v.created(dir, name, a)
	return v.overlay(a), nil
}

// Unlink removes the name of a file or symbolic link. A file still open
// in this mount stays readable and writable through its handles.
func (v *VFS) Unlink(ctx context.Context, dir uint64, name string) error {
	if err := v.writable(); err != nil {
		return err
	}
	ino, err := v.pinTarget(ctx, dir, name)
	if err != nil {
		return err
	}
	if ino == 0 {
		ino, _ = v.cachedEntry(dir, name)
	}
	err = v.auto(ctx, func(tx *client.Txn) error { return clientx.At(tx).UnlinkAt(ctx, dir, name) })
	if errLostOutcome(err) && errors.Is(err, client.ErrNotFound) {
		err = nil // the attempt whose answer was lost removed it
	}
	// dir first: a listing fetched meanwhile must not put name back.
	v.invalidate(dir, ino)
	v.dropEntry(dir, name)
	return err
}

// Rmdir removes the empty directory name from dir.
func (v *VFS) Rmdir(ctx context.Context, dir uint64, name string) error {
	if err := v.writable(); err != nil {
		return err
	}
	if name == "." {
		return syscall.EINVAL
	}
	if name == ".." {
		return syscall.ENOTEMPTY
	}
	ino, _ := v.cachedEntry(dir, name)
	err := v.auto(ctx, func(tx *client.Txn) error { return clientx.At(tx).RmdirAt(ctx, dir, name) })
	if errLostOutcome(err) && errors.Is(err, client.ErrNotFound) {
		err = nil // the attempt whose answer was lost removed it
	}
	// dir first: a listing fetched meanwhile must not put name back.
	v.invalidate(dir, ino)
	v.dropEntry(dir, name)
	return err
}

// Rename flags (as renameat2).
const (
	RenameNoReplace = 1
	RenameExchange  = 2
)

// Rename moves sname in sdir to dname in ddir, atomically replacing a
// file or empty directory there unless flags has RenameNoReplace.
// RenameExchange is not supported (EINVAL).
func (v *VFS) Rename(ctx context.Context, sdir uint64, sname string, ddir uint64, dname string, flags uint32) error {
	if err := v.writable(); err != nil {
		return err
	}
	if flags&^RenameNoReplace != 0 {
		return syscall.EINVAL
	}
	var dst uint64
	if flags&RenameNoReplace == 0 {
		var err error
		if dst, err = v.pinTarget(ctx, ddir, dname); err != nil && !errors.Is(err, client.ErrNotFound) {
			return err
		}
	}
	if dst == 0 {
		dst, _ = v.cachedEntry(ddir, dname)
	}
	src, _ := v.cachedEntry(sdir, sname)
	// Whatever the outcome, dname may exist in ddir now.
	v.names.note(ddir, dname)
	err := v.auto(ctx, func(tx *client.Txn) error {
		return clientx.At(tx).RenameAt(ctx, sdir, sname, ddir, dname, clientx.RenameOptions{NoReplace: flags&RenameNoReplace != 0})
	})
	if errLostOutcome(err) && src != 0 {
		// The attempt whose answer was lost may have moved it.
		if _, err2 := v.madeAlready(ctx, ddir, dname, err, func(a Attr) bool { return a.Ino == src }); err2 == nil {
			err = nil
		}
	}
	// And again now: a lease granted while the rename was on its way may
	// list ddir without it.
	v.names.note(ddir, dname)
	v.invalidate(sdir, ddir, src, dst)
	v.dropEntry(sdir, sname)
	v.dropEntry(ddir, dname)
	return err
}

// pinTarget returns the inode of name in dir if a file of that inode is
// open in this mount, after committing its data and making sure its
// open transaction holds it (so it stays readable when the name goes).
func (v *VFS) pinTarget(ctx context.Context, dir uint64, name string) (uint64, error) {
	v.hmu.Lock()
	none := len(v.states) == 0
	v.hmu.Unlock()
	if none {
		return 0, nil
	}
	a, err := v.Lookup(ctx, dir, name)
	if err != nil {
		return 0, err
	}
	st := v.state(a.Ino)
	if st == nil {
		return a.Ino, nil
	}
	defer v.unref(st)
	return a.Ino, st.pin(ctx, a)
}

// ---- filesystem

// StatFS describes the filesystem.
type StatFS struct {
	Blocksize   uint32
	TotalBlocks uint64
	FreeBlocks  uint64
	Files       uint64
}

// StatFS returns filesystem totals.
func (v *VFS) StatFS(ctx context.Context) (StatFS, error) {
	var s client.FsStat
	err := v.waitNamenode(ctx, func() error {
		var err error
		s, err = v.c.FsStat(ctx)
		return err
	})
	if err != nil {
		return StatFS{}, err
	}
	return StatFS{Blocksize: s.Blocksize, TotalBlocks: s.TotalBlocks, FreeBlocks: s.FreeBlocks, Files: s.Files + s.Dirs}, nil
}

// Sync (syncfs) commits the uncommitted data of every open file durably
// and returns once everything acknowledged before is durable.
func (v *VFS) Sync(ctx context.Context) error {
	v.hmu.Lock()
	var states []*fileState
	for _, st := range v.states {
		st.refs++
		states = append(states, st)
	}
	v.hmu.Unlock()
	var errs []error
	for _, st := range states {
		st.mu.Lock()
		if st.dirty {
			errs = append(errs, st.commit(ctx, true))
		}
		st.mu.Unlock()
		v.unref(st)
	}
	errs = append(errs, v.syncNamenode(ctx))
	return errors.Join(errs...)
}

// syncNamenode waits until every commit acknowledged so far is durable.
func (v *VFS) syncNamenode(ctx context.Context) error {
	return v.waitNamenode(ctx, func() error { return v.c.Sync(ctx) })
}

// mode returns the fs.FileMode bits of an attribute's type.
func typeBits(t client.FileType) fs.FileMode {
	switch t {
	case client.TypeDir:
		return fs.ModeDir
	case client.TypeSymlink:
		return fs.ModeSymlink
	case client.TypeFIFO:
		return fs.ModeNamedPipe
	case client.TypeSocket:
		return fs.ModeSocket
	case client.TypeCharDevice:
		return fs.ModeDevice | fs.ModeCharDevice
	case client.TypeBlockDevice:
		return fs.ModeDevice
	}
	return 0
}

// UnixMode returns the st_mode of attributes (type and permission bits).
func UnixMode(a Attr) uint32 {
	m := client.UnixBits(a.Mode)
	switch a.Type {
	case client.TypeDir:
		return m | syscall.S_IFDIR
	case client.TypeSymlink:
		return m | syscall.S_IFLNK
	}
	return m | TypeMode(a.Type)
}

// TypeMode returns the S_IFMT bits of a file type.
func TypeMode(t client.FileType) uint32 {
	switch t {
	case client.TypeDir:
		return syscall.S_IFDIR
	case client.TypeSymlink:
		return syscall.S_IFLNK
	case client.TypeFIFO:
		return syscall.S_IFIFO
	case client.TypeSocket:
		return syscall.S_IFSOCK
	case client.TypeCharDevice:
		return syscall.S_IFCHR
	case client.TypeBlockDevice:
		return syscall.S_IFBLK
	}
	return syscall.S_IFREG
}

// FileMode returns the io/fs mode of attributes.
func FileMode(a Attr) fs.FileMode { return a.Mode | typeBits(a.Type) }
