package vfs

import (
	"errors"
	"time"

	"github.com/plasmafs/plasma/client"
)

// AbsentError is Lookup's answer for a name that is not in a directory
// this mount holds a lease on (dirNames): no other client adds the name
// before Until, so a frontend may let its own client cache the "no such
// name" until then (the kernel's negative dentries: NegativeTimeout). It
// matches client.ErrNotFound (ENOENT).
type AbsentError struct {
	Name  string
	Until time.Time // the lease's end as this mount counts it (before the namenode's)
}

func (e *AbsentError) Error() string { return e.Name + ": no such file or directory" }
func (e *AbsentError) Unwrap() error { return client.ErrNotFound }

// negativeMargin is taken off a lease's remaining time before a frontend
// is told to cache an absence: the reply reaches the kernel a little
// after the timeout is computed (a scheduling delay on a loaded machine),
// and the cached absence must end before another client's create of the
// name, which the namenode admits only once the lease has ended there.
const negativeMargin = 100 * time.Millisecond

// NegativeTimeout returns how long a frontend may cache the absence err
// (a Lookup's error) reports: up to the mount's TTL, ending negativeMargin
// before the directory's lease. ok is false for any other error, and when
// too little of the lease is left to be worth it.
func (v *VFS) NegativeTimeout(err error) (d time.Duration, ok bool) {
	var a *AbsentError
	if v.opt.TTL <= 0 || !errors.As(err, &a) {
		return 0, false
	}
	d = min(time.Until(a.Until)-negativeMargin, v.opt.TTL)
	if d < time.Millisecond {
		return 0, false
	}
	return d, true
}
