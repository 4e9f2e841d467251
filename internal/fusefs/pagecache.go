package fusefs

import (
	"sync"
	"sync/atomic"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/vfs"
)

// pageCache decides when the kernel drops the pages it caches of a file:
// the mount, not the kernel, does it, and never while this mount has the
// file open for writing.
//
// Why: without the writeback cache the kernel copies a write(2) into the
// file's cached pages and only then sends the WRITE; a page that was
// already up to date (a reader had read the end of the file) is unlocked
// in between. If the kernel drops the file's pages meanwhile (it did at
// every open without FOPEN_KEEP_CACHE, and at every attribute reply with
// a new mtime or size under CAP_AUTO_INVAL_DATA: after each write, for
// the next read) and a reader reads that page again before the WRITE
// arrives, the READ is answered from the file without the write: ending
// at the old end of the file, the kernel fills the rest of the page with
// zeros, and keeps them once the write has grown the file past them. The
// kernel checks for writes in flight before it drops pages, but not under
// the same lock, so no timing on our side can avoid that.
//
// So the mount asks for explicit data cache control (on its own the
// kernel then drops only pages past a new end of the file), answers
// every open with FOPEN_KEEP_CACHE, and drops a file's pages itself
// (FUSE_NOTIFY_INVAL_INODE, which returns once they are gone) where the
// kernel did before: at an open (close-to-open consistency) and when it
// shows the kernel new attributes of the file. It does so only while no handle of this mount
// has the file open for writing, under a per-file lock that opening for
// writing also takes: a write can be in flight only while such a handle
// is open. What such a file's pages miss of another client's changes
// meanwhile (the first committer wins on file data: the mount's own
// uncommitted writes conflict with them) is dropped when the mount's
// last writer of the file closes it.
type pageCache struct {
	v   *vfs.VFS
	srv atomic.Pointer[fuse.Server]

	locks [256]sync.Mutex // by inode number: dropping pages, opening for writing

	mu sync.Mutex
	// shown is the size and mtime last shown to the kernel of each
	// regular file it knows, until it forgets the inode: as many FORGETs
	// as entry replies named it (a FORGET racing a new lookup of the
	// inode must not lose what the kernel was shown since).
	shown map[uint64]shownAttr
	// kept holds the files whose pages were kept although they changed,
	// because they were open for writing here: dropped when the last
	// writer closes.
	kept map[uint64]bool
}

type shownAttr struct {
	size    int64
	mtime   int64  // Unix ns
	lookups uint64 // entry replies naming the inode, less those forgotten
}

func newPageCache(v *vfs.VFS) *pageCache {
	return &pageCache{v: v, shown: map[uint64]shownAttr{}, kept: map[uint64]bool{}}
}

func (pc *pageCache) lock(ino uint64) *sync.Mutex {
	m := &pc.locks[ino%uint64(len(pc.locks))]
	m.Lock()
	return m
}

// drop makes the kernel drop its cached pages of ino. It returns once
// they are gone. Called with ino's lock held, and only when no handle of
// this mount has the file open for writing (or the only one is being
// opened: its writes come after).
func (pc *pageCache) drop(ino uint64) {
	if srv := pc.srv.Load(); srv != nil {
		// An error means the kernel does not know the inode (then it has
		// no pages of it) or is unmounting.
		srv.InodeNotify(ino, 0, 0)
	}
}

// dropUnlessWriting drops the kernel's pages of ino unless a handle of
// this mount has the file open for writing; then they are kept until the
// last one closes.
func (pc *pageCache) dropUnlessWriting(ino uint64) {
	m := pc.lock(ino)
	defer m.Unlock()
	writing := pc.v.Writers(ino) > 0
	pc.mu.Lock()
	if writing {
		pc.kept[ino] = true
	} else {
		delete(pc.kept, ino)
	}
	pc.mu.Unlock()
	if !writing {
		pc.drop(ino)
	}
}

// open runs open (of file ino) so that the kernel keeps no pages of a
// version older than the one this open reads (close-to-open
// consistency): they are dropped after it, unless another handle of this
// mount has the file open for writing (then they hold this mount's writes
// over the version it opened). Its reply tells the kernel to keep its
// cache (FOPEN_KEEP_CACHE).
func (pc *pageCache) open(ino uint64, open func() error) error {
	m := pc.lock(ino)
	defer m.Unlock()
	writing := pc.v.Writers(ino) > 0
	if err := open(); err != nil {
		return err
	}
	if !writing {
		pc.drop(ino)
	}
	return nil
}

// created is told of a file just created and opened (by a handle for
// writing if write): if the name was created by another client meanwhile
// and the file has data, the kernel's pages of it are dropped unless
// another handle has it open for writing. (A new file has none.)
func (pc *pageCache) created(a vfs.Attr, write bool) {
	if a.Size == 0 {
		return
	}
	ino := a.Ino
	m := pc.lock(ino)
	defer m.Unlock()
	mine := 0
	if write {
		mine = 1
	}
	if pc.v.Writers(ino) <= mine {
		pc.drop(ino)
	}
}

// show is told of the attributes a of a reply about to go to the kernel.
// A regular file whose size or mtime differs from what the kernel was
// last shown has changed (through another client, or this mount): the
// kernel's pages of it are dropped first, as the kernel did itself under
// CAP_AUTO_INVAL_DATA, unless the file is open for writing here.
func (pc *pageCache) show(a vfs.Attr, entry bool) {
	if pc.note(a, entry) {
		pc.dropUnlessWriting(a.Ino)
	}
}

// note records the attributes of a as shown to the kernel and reports
// whether a is a regular file whose size or mtime changed since. A
// SETATTR reply only notes them: the kernel drops what a size change
// needs itself there, and the mount's own utimes changes no data.
func (pc *pageCache) note(a vfs.Attr, entry bool) bool {
	if a.Type != client.TypeFile {
		return false
	}
	pc.mu.Lock()
	before, known := pc.shown[a.Ino]
	now := shownAttr{a.Size, a.Mtime.UnixNano(), before.lookups}
	if entry {
		now.lookups++
	}
	pc.shown[a.Ino] = now
	pc.mu.Unlock()
	return known && (before.size != now.size || before.mtime != now.mtime)
}

// released is told that a handle of ino was released. When it was open
// for writing and the file's pages were kept although the file changed,
// they are dropped now if it was the last such handle: another client's
// changes show from then on.
func (pc *pageCache) released(ino uint64, wrote bool) {
	if !wrote {
		return
	}
	pc.mu.Lock()
	kept := pc.kept[ino]
	pc.mu.Unlock()
	if kept {
		pc.dropUnlessWriting(ino)
	}
}

// forget is told that the kernel forgot n lookups of ino; once all are
// forgotten, it has no pages of it.
func (pc *pageCache) forget(ino, n uint64) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	sh, ok := pc.shown[ino]
	if !ok {
		return
	}
	if sh.lookups > n {
		sh.lookups -= n
		pc.shown[ino] = sh
		return
	}
	delete(pc.shown, ino)
	delete(pc.kept, ino)
}
