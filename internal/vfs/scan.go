package vfs

import (
	"context"
	"sync"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clientx"
)

// dirScans notices directories whose names this mount looks up at the
// namenode one after another: a stat, chmod, utime or unlink of every
// file of a directory once the cached entries have run out (a build, a
// backup, metarates' phases). After scanAfterMisses such lookups within a
// TTL, the names that follow the last one are fetched with their
// attributes in one listing request (as READDIRPLUS would), so the next
// lookups are answered from the cache instead of one namenode round trip
// each. What the listing shows is as fresh as a lookup's answer and is
// cached for the same TTL: other clients' changes show as before.
type dirScans struct {
	mu   sync.Mutex
	dirs map[uint64]*dirScan
}

type dirScan struct {
	misses int       // namenode lookups in the directory since start
	start  time.Time // of the current count
	busy   bool      // a listing is being fetched
	// failedUntil: a listing failed (a directory the mount's credential
	// may search but not read, say): none is tried again before then.
	failedUntil time.Time
}

const (
	// scanAfterMisses namenode lookups in one directory within a TTL
	// start a listing (a few lookups alone do not pay for one).
	scanAfterMisses = 8
	// scanPage is how many names a listing fetches: with scanAfterMisses,
	// at worst (lookups at random in a large directory) one listing of
	// this many entries per scanAfterMisses lookups.
	scanPage = 256
	// maxScanDirs bounds the directories counted at once.
	maxScanDirs = 1024
	// scanFailedWait: after a listing failed, the directory is not listed
	// again this long.
	scanFailedWait = 10 * time.Second
)

func newDirScans() *dirScans { return &dirScans{dirs: map[uint64]*dirScan{}} }

// missed records a namenode lookup of a name in dir and reports whether
// the names after it are to be listed now; then the caller calls done.
func (s *dirScans) missed(dir uint64, ttl time.Duration) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	d := s.dirs[dir]
	if d == nil {
		if len(s.dirs) >= maxScanDirs {
			for k, e := range s.dirs {
				if !e.busy && now.Sub(e.start) > ttl {
					delete(s.dirs, k)
				}
			}
			if len(s.dirs) >= maxScanDirs {
				return false
			}
		}
		d = &dirScan{start: now}
		s.dirs[dir] = d
	} else if now.Sub(d.start) > ttl {
		d.misses, d.start = 0, now
	}
	d.misses++
	if d.busy || d.misses < scanAfterMisses || now.Before(d.failedUntil) {
		return false
	}
	d.busy, d.misses, d.start = true, 0, now
	return true
}

// done ends the listing missed asked for; failed: it could not be made,
// and is not tried again for scanFailedWait.
func (s *dirScans) done(dir uint64, failed bool) {
	s.mu.Lock()
	if d := s.dirs[dir]; d != nil {
		d.busy = false
		if failed {
			d.failedUntil = time.Now().Add(scanFailedWait)
		}
	}
	s.mu.Unlock()
}

// scanAfter is called after a namenode lookup of name in dir: when dir is
// being scanned (dirScans), the names after name are listed with their
// attributes and cached. Errors only leave the cache as it was.
func (v *VFS) scanAfter(ctx context.Context, dir uint64, name string) {
	if v.opt.TTL <= 0 || !v.scans.missed(dir, v.opt.TTL) {
		return
	}
	epoch := v.attrEpoch()
	var page []client.DirEntry
	err := v.auto(ctx, func(tx *client.Txn) error {
		var err error
		page, _, err = clientx.At(tx).ReadDirPage(ctx, dir, name, scanPage, true)
		return err
	})
	v.scans.done(dir, err != nil)
	if err == nil {
		v.putListing(dir, page, epoch)
	}
}

// putListing caches the entries of dir and their attributes, fetched
// since epoch, unless this mount changed the names of dir meanwhile (every
// such change invalidates dir before it drops the entries it changed, so
// a listing from before cannot put back a name it removed).
func (v *VFS) putListing(dir uint64, page []client.DirEntry, epoch uint64) {
	v.cmu.Lock()
	defer v.cmu.Unlock()
	if v.changedSinceLocked(dir, epoch) {
		return
	}
	exp := time.Now().Add(v.opt.TTL)
	for i := range page {
		e := &page[i]
		if e.Ino == 0 {
			continue
		}
		v.entries[entryKey{dir, e.Name}] = cachedEntry{e.Ino, exp}
		if e.Info.Ino == e.Ino && !v.changedSinceLocked(e.Ino, epoch) {
			v.attrs[e.Ino] = cachedAttr{e.Info, exp, v.attrs[e.Ino].inval}
		}
	}
	if len(v.attrs) > 1<<16 || len(v.entries) > 1<<16 {
		v.pruneLocked()
	}
}
