package vfs

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clientx"
)

// dirNames answers "no such name" for directories this mount holds a
// lease on (client.DirLease): no other client adds a name to such a
// directory while the lease runs, so a name the mount does not know there
// does not exist. This takes the namenode off the lookup the kernel sends
// before every create.
//
// A directory's name set is its listing when the lease was granted plus
// every name this mount created, linked or renamed into it. Names are
// never taken out (a name that went away only costs a namenode lookup),
// so concurrent operations cannot leave out a name that exists.
type dirNames struct {
	c       *client.Client
	mu      sync.Mutex
	dirs    map[uint64]*leasedDir
	misses  map[uint64]int       // namenode "not found" answers per directory without a lease
	refused map[uint64]time.Time // no lease asked for until then
}

type leasedDir struct {
	lease clientx.DirLease
	names map[string]struct{}
	busy  bool // a lease request is on its way
}

const (
	// maxLeasedDirs bounds the directories leased at once.
	maxLeasedDirs = 1024
	// leaseAfterMisses: a lease is asked for at the second namenode
	// lookup of a missing name in a directory (one probe alone does not
	// pay for the lease request).
	leaseAfterMisses = 2
	// leaseRefusedWait: after a refusal the directory is not asked for
	// again this long.
	leaseRefusedWait = time.Second
)

func newDirNames(c *client.Client) *dirNames {
	return &dirNames{c: c, dirs: map[uint64]*leasedDir{}, misses: map[uint64]int{}, refused: map[uint64]time.Time{}}
}

// absent reports whether name is known not to exist in dir, and until
// when at least (the end of the lease, as this mount counts it: before the
// namenode's), renewing the lease when half of it has run. Only names the
// namenode would take are answered here: for any other it has the right
// error (ENAMETOOLONG, say).
func (d *dirNames) absent(ctx context.Context, dir uint64, name string) (until time.Time, ok bool) {
	if name == "" || len(name) > client.MaxNameLen || strings.ContainsAny(name, "/\x00") {
		return time.Time{}, false
	}
	d.mu.Lock()
	ld := d.dirs[dir]
	if ld == nil {
		d.mu.Unlock()
		return time.Time{}, false
	}
	if !clientx.LeaseValid(d.c, ld.lease) {
		if !ld.busy {
			delete(d.dirs, dir)
		}
		d.mu.Unlock()
		return time.Time{}, false
	}
	renew := !ld.busy && time.Until(ld.lease.Expires) < ld.lease.Term/2
	if renew {
		ld.busy = true
	}
	d.mu.Unlock()
	if renew {
		d.request(ctx, dir)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	ld = d.dirs[dir]
	if ld == nil || !clientx.LeaseValid(d.c, ld.lease) {
		return time.Time{}, false
	}
	if _, known := ld.names[name]; known {
		return time.Time{}, false
	}
	return ld.lease.Expires, true
}

// missed records that the namenode found no name in dir; the second
// time, a lease is asked for.
func (d *dirNames) missed(ctx context.Context, dir uint64) {
	d.mu.Lock()
	if ld := d.dirs[dir]; ld != nil && (ld.busy || clientx.LeaseValid(d.c, ld.lease)) {
		d.mu.Unlock()
		return
	}
	if until, ok := d.refused[dir]; ok && time.Now().Before(until) {
		d.mu.Unlock()
		return
	}
	delete(d.refused, dir)
	d.misses[dir]++
	if len(d.dirs) >= maxLeasedDirs {
		d.sweepLocked()
	}
	if d.misses[dir] < leaseAfterMisses || len(d.dirs) >= maxLeasedDirs {
		if len(d.misses) > 4*maxLeasedDirs {
			clear(d.misses)
		}
		d.mu.Unlock()
		return
	}
	delete(d.misses, dir)
	ld := d.dirs[dir]
	if ld == nil {
		ld = &leasedDir{names: map[string]struct{}{}}
		d.dirs[dir] = ld
	}
	ld.busy = true
	d.mu.Unlock()
	d.request(ctx, dir)
}

// sweepLocked forgets directories whose lease ended and refusals that
// ran out (called with mu held when the tables are full).
func (d *dirNames) sweepLocked() {
	for dir, ld := range d.dirs {
		if !ld.busy && !clientx.LeaseValid(d.c, ld.lease) {
			delete(d.dirs, dir)
		}
	}
	now := time.Now()
	for dir, until := range d.refused {
		if !now.Before(until) {
			delete(d.refused, dir)
		}
	}
}

// request asks for (or renews) the lease on dir; ld.busy is set.
func (d *dirNames) request(ctx context.Context, dir uint64) {
	l, ok, err := clientx.LeaseDir(ctx, d.c, dir)
	d.mu.Lock()
	defer d.mu.Unlock()
	ld := d.dirs[dir]
	if ld == nil {
		return
	}
	ld.busy = false
	switch {
	case err != nil || !ok:
		delete(d.dirs, dir)
		if err == nil {
			if len(d.refused) >= 4*maxLeasedDirs {
				d.sweepLocked()
			}
			d.refused[dir] = time.Now().Add(leaseRefusedWait)
		}
	case l.New:
		// Names noted meanwhile stay (the listing may predate them).
		for _, n := range l.Names {
			ld.names[n] = struct{}{}
		}
		ld.lease = l
	case clientx.LeaseValid(d.c, ld.lease):
		// A renewal continues the lease whose names we know.
		ld.lease = l
	default:
		// A renewal of a lease we no longer count on: its names are
		// not known to be complete.
		delete(d.dirs, dir)
	}
}

// note records that name exists in dir (created, linked or renamed there
// by this mount, or found to exist).
func (d *dirNames) note(dir uint64, name string) {
	d.mu.Lock()
	if ld := d.dirs[dir]; ld != nil {
		ld.names[name] = struct{}{}
	}
	d.mu.Unlock()
}
