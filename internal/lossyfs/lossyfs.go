package lossyfs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// pageSize is the unit in which unsynced data is kept.
const pageSize = 4096

// FS is a mounted lossy filesystem.
type FS struct {
	backing    string
	mountpoint string
	dev        uint64 // device of the backing directory
	srv        *fuse.Server
	conn       uint32 // FUSE connection number (for /sys/fs/fuse/connections)

	// gate is held shared by every operation that changes the backing
	// directory, and exclusively by Cut and Unmount while they set cut:
	// once they have it, nothing reaches the backing directory any more.
	gate sync.RWMutex
	cut  bool

	mu     sync.Mutex
	states map[uint64]*fileState // by backing inode number

	umu       sync.Mutex
	unmounted bool
}

// fileState is one backing file's page cache: what was written to it and
// not yet fsynced. It holds its own descriptor of the backing file, which
// also keeps the inode (and so its number, the key in FS.states) from being
// reused while the state exists.
type fileState struct {
	ino   uint64
	opens int // open handles; guarded by FS.mu

	mu sync.Mutex
	fd int // backing file; -1 once dropped
	rw bool
	// pending is set while the file has unsynced changes. Then size is
	// its logical size, and low the smallest size it was truncated to
	// since the last sync: backing content at and beyond low is gone
	// (reads as zeros unless a dirty page covers it). dirty holds whole
	// pages; bytes of a page beyond size are zero.
	pending   bool
	size, low int64
	dirty     map[int64][]byte
}

// handle is an open file: all its operations go to the file's state.
type handle struct{ st *fileState }

// Mount mounts a lossy view of backingDir on mountpoint (which must exist).
// Needs root.
func Mount(backingDir, mountpoint string) (*FS, error) {
	var err error
	if backingDir, err = filepath.Abs(backingDir); err != nil {
		return nil, err
	}
	if mountpoint, err = filepath.Abs(mountpoint); err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Stat(backingDir, &st); err != nil {
		return nil, fmt.Errorf("lossyfs: backing directory: %w", err)
	}
	root, err := fs.NewLoopbackRoot(backingDir)
	if err != nil {
		return nil, fmt.Errorf("lossyfs: %w", err)
	}
	f := &FS{backing: backingDir, mountpoint: mountpoint, dev: st.Dev, states: map[uint64]*fileState{}}
	rn := &node{LoopbackNode: root.(*fs.LoopbackNode), fsys: f}
	timeout := time.Second
	// go-fuse opens /dev/fuse without O_CLOEXEC when it calls mount(2)
	// itself. Every process started later (the daemons under test) would
	// inherit it and keep the connection alive after this process died,
	// hanging every user of the mount. Hold the fork lock until the
	// descriptor is close-on-exec.
	syscall.ForkLock.Lock()
	srv, err := fs.Mount(mountpoint, rn, &fs.Options{
		MountOptions: fuse.MountOptions{
			// mount(2) directly: no fusermount (package fuse3) needed.
			DirectMountStrict: true,
			FsName:            backingDir,
			Name:              "lossyfs",
			MaxWrite:          1 << 20,
			// Without this the kernel asks for security.capability on
			// every write.
			DisableXAttrs: true,
			// The kernel's page cache must never be dropped because
			// attributes changed (the backing file's mtime changes at
			// every fsync): a read racing with a write could then
			// fetch a page before the write reached this server and
			// cache the old content. Every change goes through the
			// kernel, so its cache never needs invalidating.
			ExplicitDataCacheControl: true,
		},
		// Nothing but this server changes the tree, so the kernel may
		// cache names and attributes.
		EntryTimeout: &timeout,
		AttrTimeout:  &timeout,
	})
	closeFuseOnExec()
	syscall.ForkLock.Unlock()
	if err != nil {
		return nil, fmt.Errorf("lossyfs: mount %s: %w", mountpoint, err)
	}
	f.srv = srv
	var mst unix.Stat_t
	if err := unix.Stat(mountpoint, &mst); err != nil {
		f.Cut()
		return nil, fmt.Errorf("lossyfs: stat %s: %w", mountpoint, err)
	}
	f.conn = unix.Minor(mst.Dev)
	return f, nil
}

// closeFuseOnExec sets close-on-exec on every descriptor of /dev/fuse this
// process has.
func closeFuseOnExec() {
	ents, _ := os.ReadDir("/proc/self/fd")
	for _, e := range ents {
		if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && l == "/dev/fuse" {
			if fd, err := strconv.Atoi(e.Name()); err == nil {
				syscall.CloseOnExec(fd)
			}
		}
	}
}

// Mountpoint returns where the filesystem is mounted.
func (f *FS) Mountpoint() string { return f.mountpoint }

// Cut simulates a power cut: every write not yet fsynced is dropped,
// nothing more reaches the backing directory, and the filesystem is
// unmounted (forcibly, by aborting the FUSE connection, if files are still
// open: their users get errors). Mount the backing directory again to see
// what survived.
func (f *FS) Cut() error {
	f.gate.Lock()
	f.cut = true
	f.gate.Unlock()
	f.mu.Lock()
	states := f.states
	f.states = map[uint64]*fileState{}
	f.mu.Unlock()
	for _, s := range states {
		s.mu.Lock()
		s.dropLocked()
		s.mu.Unlock()
	}
	return f.unmount()
}

// Unmount is a clean shutdown: it writes all unsynced data to the backing
// directory (as unmounting a real filesystem would) and unmounts.
// After Cut it does nothing.
func (f *FS) Unmount() error {
	var serr error
	if !f.isCut() {
		serr = f.Sync()
	}
	f.gate.Lock()
	f.cut = true
	f.gate.Unlock()
	if err := f.unmount(); err != nil {
		return err
	}
	return serr
}

// Sync writes every file's unsynced data to the backing directory, as
// sync(1) would on a real filesystem (sync(2) and syncfs(2) do not reach
// FUSE servers).
func (f *FS) Sync() error {
	leave, errno := f.enter()
	if errno != 0 {
		return errors.New("lossyfs: sync after power cut")
	}
	defer leave()
	f.mu.Lock()
	states := make([]*fileState, 0, len(f.states))
	for _, s := range f.states {
		states = append(states, s)
	}
	f.mu.Unlock()
	var err error
	for _, s := range states {
		if errno := s.flush(true); errno != 0 && err == nil {
			err = fmt.Errorf("lossyfs: sync: %w", errno)
		}
		f.mu.Lock()
		if s.opens == 0 {
			s.mu.Lock()
			f.forgetLocked(s)
			s.mu.Unlock()
		}
		f.mu.Unlock()
	}
	return err
}

func (f *FS) unmount() error {
	f.umu.Lock()
	defer f.umu.Unlock()
	if f.unmounted {
		return nil
	}
	if err := unix.Unmount(f.mountpoint, 0); err != nil {
		// Busy (files are open): abort the connection, so that every
		// request fails and the server's loops end, then detach.
		aerr := f.abort()
		if derr := unix.Unmount(f.mountpoint, unix.MNT_DETACH); derr != nil {
			return fmt.Errorf("lossyfs: unmount %s: %v; lazy unmount: %v", f.mountpoint, err, derr)
		}
		if aerr != nil {
			// Detached, but the server runs until the last open file is
			// closed; do not wait for it.
			f.unmounted = true
			return nil
		}
	}
	f.srv.Wait()
	f.unmounted = true
	return nil
}

// abort aborts the FUSE connection through the fusectl filesystem,
// mounting it if this machine has not.
func (f *FS) abort() error {
	const ctl = "/sys/fs/fuse/connections"
	p := fmt.Sprintf("%s/%d/abort", ctl, f.conn)
	if _, err := os.Stat(p); err != nil {
		if err := unix.Mount("fusectl", ctl, "fusectl", 0, ""); err != nil && !errors.Is(err, unix.EBUSY) {
			return fmt.Errorf("mount fusectl: %w", err)
		}
	}
	return os.WriteFile(p, []byte("1"), 0)
}

// enter admits an operation that may change the backing directory; it
// fails with EIO after a power cut. Call the returned func when done.
func (f *FS) enter() (func(), syscall.Errno) {
	f.gate.RLock()
	if f.cut {
		f.gate.RUnlock()
		return nil, syscall.EIO
	}
	return f.gate.RUnlock, 0
}

func (f *FS) isCut() bool {
	f.gate.RLock()
	defer f.gate.RUnlock()
	return f.cut
}

// acquire returns the state of the regular file at p (a path, or
// /proc/self/fd/N), creating it if needed, with one more reference.
func (f *FS) acquire(p string) (*fileState, syscall.Errno) {
	rw := true
	fd, err := unix.Open(p, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.EACCES) || errors.Is(err, unix.EROFS) || errors.Is(err, unix.ETXTBSY) {
		rw = false
		fd, err = unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		return nil, fs.ToErrno(err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, fs.ToErrno(err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return nil, syscall.EINVAL
	}
	if st.Dev != f.dev {
		// States are keyed by inode number alone.
		unix.Close(fd)
		return nil, syscall.EXDEV
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if s := f.states[st.Ino]; s != nil {
		s.opens++
		s.mu.Lock()
		if rw && !s.rw && s.fd >= 0 {
			unix.Close(s.fd)
			s.fd, s.rw, fd = fd, true, -1
		}
		s.mu.Unlock()
		if fd >= 0 {
			unix.Close(fd)
		}
		return s, 0
	}
	s := &fileState{ino: st.Ino, fd: fd, rw: rw, opens: 1}
	f.states[st.Ino] = s
	return s, 0
}

// unref drops a reference to s; a state without references is forgotten
// unless it holds unsynced data of a file that still has a name.
func (f *FS) unref(s *fileState) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s.opens--
	if s.opens > 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	f.forgetLocked(s)
}

// forgetLocked forgets s (with f.mu and s.mu held, no references) unless
// it holds unsynced data of a file that still has a name.
func (f *FS) forgetLocked(s *fileState) {
	if s.fd < 0 {
		return
	}
	if s.pending {
		var st unix.Stat_t
		if err := unix.Fstat(s.fd, &st); err != nil || st.Nlink > 0 {
			return
		}
	}
	if f.states[s.ino] == s {
		delete(f.states, s.ino)
	}
	s.dropLocked()
}

// forgetUnlinked forgets the unreferenced state of inode ino if the file
// has no name left.
func (f *FS) forgetUnlinked(ino uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s := f.states[ino]; s != nil && s.opens == 0 {
		s.mu.Lock()
		f.forgetLocked(s)
		s.mu.Unlock()
	}
}

// fixAttr replaces the size in attributes read from the backing file by
// the pending size, if the file has one.
func (f *FS) fixAttr(a *fuse.Attr) {
	if a.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return
	}
	f.mu.Lock()
	s := f.states[a.Ino]
	f.mu.Unlock()
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pending {
		a.Size = uint64(s.size)
		a.Blocks = (a.Size + 511) / 512
	}
}

func (s *fileState) dropLocked() {
	if s.fd >= 0 {
		unix.Close(s.fd)
	}
	s.fd = -1
	s.dirty = nil
	s.pending = false
}

// startPending makes the state pending if it is not (s.mu held).
func (s *fileState) startPending() syscall.Errno {
	if s.pending {
		return 0
	}
	var st unix.Stat_t
	if err := unix.Fstat(s.fd, &st); err != nil {
		return fs.ToErrno(err)
	}
	s.pending, s.size, s.low = true, st.Size, st.Size
	s.dirty = map[int64][]byte{}
	return 0
}

// pread fills b from the backing file at off, up to its end; it returns
// how many bytes it read.
func (s *fileState) pread(b []byte, off int64) (int, syscall.Errno) {
	n := 0
	for n < len(b) {
		k, err := unix.Pread(s.fd, b[n:], off+int64(n))
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return n, fs.ToErrno(err)
		}
		if k == 0 {
			break
		}
		n += k
	}
	return n, 0
}

// readBase fills b with the backing content at off below limit, and zeros.
func (s *fileState) readBase(b []byte, off, limit int64) syscall.Errno {
	n := 0
	if off < limit {
		var errno syscall.Errno
		if n, errno = s.pread(b[:min(int64(len(b)), limit-off)], off); errno != 0 {
			return errno
		}
	}
	clear(b[n:])
	return 0
}

func (s *fileState) read(dest []byte, off int64) (int, syscall.Errno) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fd < 0 {
		return 0, syscall.EIO
	}
	if !s.pending {
		return s.pread(dest, off)
	}
	if off >= s.size {
		return 0, 0
	}
	end := min(off+int64(len(dest)), s.size)
	b := dest[:end-off]
	if errno := s.readBase(b, off, s.low); errno != 0 {
		return 0, errno
	}
	for pg := off / pageSize; pg*pageSize < end; pg++ {
		if p := s.dirty[pg]; p != nil {
			lo, hi := max(off, pg*pageSize), min(end, (pg+1)*pageSize)
			copy(b[lo-off:hi-off], p[lo-pg*pageSize:hi-pg*pageSize])
		}
	}
	return len(b), 0
}

func (s *fileState) write(data []byte, off int64) syscall.Errno {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fd < 0 {
		return syscall.EIO
	}
	if !s.rw {
		return syscall.EBADF
	}
	if errno := s.startPending(); errno != 0 {
		return errno
	}
	end := off + int64(len(data))
	for pg := off / pageSize; pg*pageSize < end; pg++ {
		p := s.dirty[pg]
		if p == nil {
			p = make([]byte, pageSize)
			if errno := s.readBase(p, pg*pageSize, s.low); errno != 0 {
				return errno
			}
			s.dirty[pg] = p
		}
		lo, hi := max(off, pg*pageSize), min(end, (pg+1)*pageSize)
		copy(p[lo-pg*pageSize:hi-pg*pageSize], data[lo-off:hi-off])
	}
	s.size = max(s.size, end)
	return 0
}

func (s *fileState) truncate(size int64) syscall.Errno {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fd < 0 {
		return syscall.EIO
	}
	if !s.rw {
		return syscall.EBADF
	}
	if errno := s.startPending(); errno != 0 {
		return errno
	}
	if size < s.size {
		for pg, p := range s.dirty {
			if base := pg * pageSize; base >= size {
				delete(s.dirty, pg)
			} else if base+pageSize > size {
				clear(p[size-base:])
			}
		}
		s.low = min(s.low, size)
	}
	s.size = size
	return 0
}

// extend grows the file to at least size (fallocate mode 0).
func (s *fileState) extend(size int64) syscall.Errno {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fd < 0 {
		return syscall.EIO
	}
	if !s.rw {
		return syscall.EBADF
	}
	if errno := s.startPending(); errno != 0 {
		return errno
	}
	s.size = max(s.size, size)
	return 0
}

// flush writes the pending changes to the backing file. A state dropped
// in the meantime is an error (EIO) unless droppedOK: Sync may meet states
// forgotten after their last handle was closed, and those were clean.
func (s *fileState) flush(droppedOK bool) syscall.Errno {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fd < 0 {
		if droppedOK {
			return 0
		}
		return syscall.EIO
	}
	if !s.pending {
		return 0
	}
	var st unix.Stat_t
	if err := unix.Fstat(s.fd, &st); err != nil {
		return fs.ToErrno(err)
	}
	if s.low < st.Size {
		if err := unix.Ftruncate(s.fd, s.low); err != nil {
			return fs.ToErrno(err)
		}
	}
	pages := slices.Sorted(func(yield func(int64) bool) {
		for pg := range s.dirty {
			if !yield(pg) {
				return
			}
		}
	})
	const maxRun = 256 // pages per pwrite
	buf := make([]byte, 0, maxRun*pageSize)
	for i := 0; i < len(pages); {
		j := i + 1
		for j < len(pages) && j-i < maxRun && pages[j] == pages[j-1]+1 {
			j++
		}
		start := pages[i] * pageSize
		end := min((pages[j-1]+1)*pageSize, s.size)
		buf = buf[:0]
		for _, pg := range pages[i:j] {
			buf = append(buf, s.dirty[pg]...)
		}
		if start < end {
			b := buf[:end-start]
			for len(b) > 0 {
				k, err := unix.Pwrite(s.fd, b, start)
				if errors.Is(err, unix.EINTR) {
					continue
				}
				if err != nil {
					return fs.ToErrno(err)
				}
				b, start = b[k:], start+int64(k)
			}
		}
		i = j
	}
	if err := unix.Ftruncate(s.fd, s.size); err != nil {
		return fs.ToErrno(err)
	}
	s.dirty, s.pending = nil, false
	return 0
}

func (s *fileState) getattr(out *fuse.AttrOut) syscall.Errno {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fd < 0 {
		return syscall.EIO
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(s.fd, &st); err != nil {
		return fs.ToErrno(err)
	}
	out.FromStat(&st)
	if s.pending {
		out.Size = uint64(s.size)
		out.Blocks = (out.Size + 511) / 512
	}
	return 0
}

// node is a loopback node whose regular files keep their data writes in
// a fileState until fsync.
type node struct {
	*fs.LoopbackNode
	fsys *FS
}

var (
	_ fs.NodeWrapChilder    = (*node)(nil)
	_ fs.NodeLookuper       = (*node)(nil)
	_ fs.NodeGetattrer      = (*node)(nil)
	_ fs.NodeSetattrer      = (*node)(nil)
	_ fs.NodeStatxer        = (*node)(nil)
	_ fs.NodeOpener         = (*node)(nil)
	_ fs.NodeCreater        = (*node)(nil)
	_ fs.NodeReader         = (*node)(nil)
	_ fs.NodeWriter         = (*node)(nil)
	_ fs.NodeFsyncer        = (*node)(nil)
	_ fs.NodeReleaser       = (*node)(nil)
	_ fs.NodeAllocater      = (*node)(nil)
	_ fs.NodeCopyFileRanger = (*node)(nil)
	_ fs.NodeTmpfiler       = (*node)(nil)
	_ fs.NodeMkdirer        = (*node)(nil)
	_ fs.NodeMknoder        = (*node)(nil)
	_ fs.NodeSymlinker      = (*node)(nil)
	_ fs.NodeLinker         = (*node)(nil)
	_ fs.NodeUnlinker       = (*node)(nil)
	_ fs.NodeRmdirer        = (*node)(nil)
	_ fs.NodeRenamer        = (*node)(nil)
)

// WrapChild makes every node the loopback creates one of ours.
func (n *node) WrapChild(ctx context.Context, ops fs.InodeEmbedder) fs.InodeEmbedder {
	return &node{LoopbackNode: ops.(*fs.LoopbackNode), fsys: n.fsys}
}

// backingPath is the node's path in the backing directory.
func (n *node) backingPath() string {
	return filepath.Join(n.RootData.Path, n.Path(n.RootData.RootNode.EmbeddedInode()))
}

func (n *node) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if n.fsys.isCut() {
		return nil, syscall.EIO
	}
	ch, errno := n.LoopbackNode.Lookup(ctx, name, out)
	if errno == 0 {
		n.fsys.fixAttr(&out.Attr)
	}
	return ch, errno
}

func (n *node) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	if h, ok := f.(*handle); ok {
		return h.st.getattr(out)
	}
	if n.fsys.isCut() {
		return syscall.EIO
	}
	errno := n.LoopbackNode.Getattr(ctx, nil, out)
	if errno == 0 {
		n.fsys.fixAttr(&out.Attr)
	}
	return errno
}

// Statx is refused, so the kernel uses Getattr (which knows pending sizes).
func (n *node) Statx(ctx context.Context, f fs.FileHandle, flags uint32, mask uint32, out *fuse.StatxOut) syscall.Errno {
	return syscall.ENOSYS
}

func (n *node) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	leave, errno := n.fsys.enter()
	if errno != 0 {
		return errno
	}
	defer leave()
	var s *fileState
	if h, ok := f.(*handle); ok {
		s = h.st
	}
	if size, ok := in.GetSize(); ok {
		if s == nil {
			if s, errno = n.fsys.acquire(n.backingPath()); errno != 0 {
				return errno
			}
			defer n.fsys.unref(s)
		}
		if errno := s.truncate(int64(size)); errno != 0 {
			return errno
		}
		in.Valid &^= fuse.FATTR_SIZE
	}
	const passed = fuse.FATTR_MODE | fuse.FATTR_UID | fuse.FATTR_GID | fuse.FATTR_ATIME | fuse.FATTR_MTIME |
		fuse.FATTR_ATIME_NOW | fuse.FATTR_MTIME_NOW
	if in.Valid&passed != 0 {
		if errno := n.LoopbackNode.Setattr(ctx, nil, in, out); errno != 0 {
			return errno
		}
	}
	if s != nil {
		return s.getattr(out)
	}
	if errno := n.LoopbackNode.Getattr(ctx, nil, out); errno != 0 {
		return errno
	}
	n.fsys.fixAttr(&out.Attr)
	return 0
}

func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	leave, errno := n.fsys.enter()
	if errno != 0 {
		return nil, 0, errno
	}
	defer leave()
	s, errno := n.fsys.acquire(n.backingPath())
	if errno != 0 {
		return nil, 0, errno
	}
	if flags&syscall.O_TRUNC != 0 {
		if errno := s.truncate(0); errno != 0 {
			n.fsys.unref(s)
			return nil, 0, errno
		}
	}
	// The kernel's page cache always agrees with this server's view, so
	// it need not be dropped on open.
	return &handle{st: s}, fuse.FOPEN_KEEP_CACHE, 0
}

func (n *node) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	leave, errno := n.fsys.enter()
	if errno != 0 {
		return nil, nil, 0, errno
	}
	defer leave()
	// Truncating an existing file is a data write: done in memory below.
	ch, lf, _, errno := n.LoopbackNode.Create(ctx, name, flags&^syscall.O_TRUNC, mode, out)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	// The loopback's descriptor only serves to find the new inode.
	fd, _ := lf.(fs.FilePassthroughFder).PassthroughFd()
	s, errno := n.fsys.acquire(fmt.Sprintf("/proc/self/fd/%d", fd))
	lf.(fs.FileReleaser).Release(ctx)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	if flags&syscall.O_TRUNC != 0 {
		if errno := s.truncate(0); errno != 0 {
			n.fsys.unref(s)
			return nil, nil, 0, errno
		}
	}
	n.fsys.fixAttr(&out.Attr)
	return ch, &handle{st: s}, fuse.FOPEN_KEEP_CACHE, 0
}

func (n *node) Read(ctx context.Context, f fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	h, ok := f.(*handle)
	if !ok {
		return nil, syscall.EBADF
	}
	k, errno := h.st.read(dest, off)
	if errno != 0 {
		return nil, errno
	}
	return fuse.ReadResultData(dest[:k]), 0
}

func (n *node) Write(ctx context.Context, f fs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	h, ok := f.(*handle)
	if !ok {
		return 0, syscall.EBADF
	}
	if errno := h.st.write(data, off); errno != 0 {
		return 0, errno
	}
	return uint32(len(data)), 0
}

// Fsync (and fdatasync) makes the file's data and size durable.
func (n *node) Fsync(ctx context.Context, f fs.FileHandle, flags uint32) syscall.Errno {
	h, ok := f.(*handle)
	if !ok {
		return syscall.EBADF
	}
	leave, errno := n.fsys.enter()
	if errno != 0 {
		return errno
	}
	defer leave()
	return h.st.flush(false)
}

func (n *node) Release(ctx context.Context, f fs.FileHandle) syscall.Errno {
	if h, ok := f.(*handle); ok {
		n.fsys.unref(h.st)
	}
	return 0
}

func (n *node) Allocate(ctx context.Context, f fs.FileHandle, off uint64, size uint64, mode uint32) syscall.Errno {
	h, ok := f.(*handle)
	if !ok {
		return syscall.EBADF
	}
	switch mode {
	case 0:
		return h.st.extend(int64(off + size))
	case unix.FALLOC_FL_KEEP_SIZE:
		return 0
	}
	return syscall.EOPNOTSUPP
}

// CopyFileRange is refused; the kernel falls back to reads and writes.
func (n *node) CopyFileRange(ctx context.Context, fhIn fs.FileHandle, offIn uint64, out *fs.Inode, fhOut fs.FileHandle, offOut uint64, len uint64, flags uint64) (uint32, syscall.Errno) {
	return 0, syscall.ENOSYS
}

// Tmpfile is refused: an O_TMPFILE file has no name to find its state by.
func (n *node) Tmpfile(ctx context.Context, flags uint32, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	return nil, nil, 0, syscall.EOPNOTSUPP
}

// Namespace operations go straight to the backing directory.

func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	leave, errno := n.fsys.enter()
	if errno != 0 {
		return nil, errno
	}
	defer leave()
	return n.LoopbackNode.Mkdir(ctx, name, mode, out)
}

func (n *node) Mknod(ctx context.Context, name string, mode, rdev uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	leave, errno := n.fsys.enter()
	if errno != 0 {
		return nil, errno
	}
	defer leave()
	return n.LoopbackNode.Mknod(ctx, name, mode, rdev, out)
}

func (n *node) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	leave, errno := n.fsys.enter()
	if errno != 0 {
		return nil, errno
	}
	defer leave()
	return n.LoopbackNode.Symlink(ctx, target, name, out)
}

func (n *node) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	leave, errno := n.fsys.enter()
	if errno != 0 {
		return nil, errno
	}
	defer leave()
	if t, ok := target.(*node); ok {
		target = t.LoopbackNode
	}
	ch, errno := n.LoopbackNode.Link(ctx, target, name, out)
	if errno == 0 {
		n.fsys.fixAttr(&out.Attr)
	}
	return ch, errno
}

func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	leave, errno := n.fsys.enter()
	if errno != 0 {
		return errno
	}
	defer leave()
	var st unix.Stat_t
	known := unix.Lstat(filepath.Join(n.backingPath(), name), &st) == nil
	errno = n.LoopbackNode.Unlink(ctx, name)
	if errno == 0 && known {
		n.fsys.forgetUnlinked(st.Ino)
	}
	return errno
}

func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno {
	leave, errno := n.fsys.enter()
	if errno != 0 {
		return errno
	}
	defer leave()
	return n.LoopbackNode.Rmdir(ctx, name)
}

func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	leave, errno := n.fsys.enter()
	if errno != 0 {
		return errno
	}
	defer leave()
	np, ok := newParent.(*node)
	if !ok {
		return syscall.EXDEV
	}
	var st unix.Stat_t
	replaced := flags&fs.RENAME_EXCHANGE == 0 && unix.Lstat(filepath.Join(np.backingPath(), newName), &st) == nil
	errno = n.LoopbackNode.Rename(ctx, name, np.LoopbackNode, newName, flags)
	if errno == 0 && replaced {
		n.fsys.forgetUnlinked(st.Ino)
	}
	return errno
}
