package namenode

import (
	"fmt"
	"time"

	"github.com/plasmafs/plasma/internal/auth"
	"github.com/plasmafs/plasma/internal/wire"
)

// Directory leases let a client (a mount) answer "no such name" in a
// directory without asking: while a client holds the lease on a directory,
// no other client adds a name to it. The holder starts from the listing
// it got with the lease and adds the names it creates itself.
//
// There is no callback channel to clients (a client reads its connection
// only while it waits for an answer), so a lease is not recalled but
// waited out: another client's request that would add a name to a leased
// directory ends the lease's renewals and is re-run when the lease has
// expired (retryAfter), at most leaseTerm later. After that the directory
// gets no new lease for leaseCoolOff, so directories several clients
// write to fall back to plain lookups. A lease whose connection closed is
// no longer renewed but still runs out its term (the client may not
// have noticed yet; it drops its leases when it reconnects).
//
// The holder counts its lease from before it sent the request and the
// namenode from when it granted it, so the holder's lease always ends
// first. A namenode that starts admits additions only after leaseTerm
// (leases its predecessor granted have ended by then).
//
// Lock discipline: guarded by Namenode.mu.
type dirLeases struct {
	term    time.Duration
	coolOff time.Duration
	m       map[uint64]*dirLease
	cold    map[uint64]time.Time // no lease on these directories until then
	grace   time.Time            // additions wait until then (start-up)
	sweepAt int                  // table size at which ended entries are swept
}

type dirLease struct {
	holder   *conn
	expires  time.Time
	recalled bool // another client waits: no renewal
}

const (
	leaseTerm    = 300 * time.Millisecond
	leaseCoolOff = 3 * time.Second
	// maxLeaseListing bounds the listing sent with a new lease; larger
	// directories get no lease.
	maxLeaseListing = 4096
)

// newDirLeases starts the lease table of a namenode starting now; fresh:
// its namespace is new, so there is no predecessor's lease to wait out.
func newDirLeases(now time.Time, fresh bool) *dirLeases {
	l := &dirLeases{term: leaseTerm, coolOff: leaseCoolOff, m: map[uint64]*dirLease{},
		cold: map[uint64]time.Time{}, grace: now.Add(leaseTerm), sweepAt: 1024}
	if fresh {
		l.grace = now
	}
	return l
}

// renew extends c's lease on dir if c holds it and it is still running:
// the names the holder knows stay right, so no listing is needed.
func (l *dirLeases) renew(c *conn, dir uint64, now time.Time) bool {
	d := l.m[dir]
	if d == nil || d.holder != c || d.recalled || !now.Before(d.expires) {
		return false
	}
	d.expires = now.Add(l.term)
	return true
}

// mayGrant reports whether dir can be leased to c now (nobody else holds
// it, it is not cooling off).
func (l *dirLeases) mayGrant(c *conn, dir uint64, now time.Time) bool {
	if until, ok := l.cold[dir]; ok {
		if now.Before(until) {
			return false
		}
		delete(l.cold, dir)
	}
	d := l.m[dir]
	return d == nil || d.holder == c || !now.Before(d.expires)
}

func (l *dirLeases) grant(c *conn, dir uint64, now time.Time) {
	if len(l.m)+len(l.cold) >= l.sweepAt {
		l.sweep(now)
	}
	l.m[dir] = &dirLease{holder: c, expires: now.Add(l.term)}
}

// sweep forgets ended leases and cool-offs, so the tables hold about what
// runs now (a client leasing directory after directory does not grow
// them for ever).
func (l *dirLeases) sweep(now time.Time) {
	for dir, d := range l.m {
		if !now.Before(d.expires) {
			delete(l.m, dir)
		}
	}
	for dir, until := range l.cold {
		if !now.Before(until) {
			delete(l.cold, dir)
		}
	}
	l.sweepAt = max(1024, 2*(len(l.m)+len(l.cold)))
}

// admit is asked before c adds a name to dir. It returns a retryAfter
// while another client's lease (or the start-up grace) runs.
func (l *dirLeases) admit(c *conn, dir uint64, now time.Time) error {
	if now.Before(l.grace) {
		return &retryAfter{at: l.grace, why: "namenode starting: earlier directory leases may still run"}
	}
	d := l.m[dir]
	if d == nil || d.holder == c {
		return nil
	}
	if !now.Before(d.expires) {
		delete(l.m, dir)
		return nil
	}
	if !d.recalled {
		d.recalled = true
		l.cold[dir] = d.expires.Add(l.coolOff)
	}
	return &retryAfter{at: d.expires, why: fmt.Sprintf("directory %d is leased to another client", dir)}
}

// dropConn is called when c's connection has closed. Its leases still
// run their term: the holder may not know yet that its connection is
// gone (a connection the network broke looks alive to it until it next
// reads), and until then it counts on them. They are left without a
// holder, so nobody renews them, nobody adds a name to their directories
// and nobody gets them before they have run out.
func (l *dirLeases) dropConn(c *conn) {
	for _, d := range l.m {
		if d.holder == c {
			d.holder = nil
		}
	}
}

// held is the number of leases held by a connection (for tests).
func (l *dirLeases) held() int {
	n := 0
	for _, d := range l.m {
		if d.holder != nil {
			n++
		}
	}
	return n
}

// opLeaseDir grants or renews a lease on directory q.Ino. The answer:
// Counters[0] the lease's term in nanoseconds (0: no lease),
// Counters[1] 1 for a new lease, whose listing is in Paths.
func (n *Namenode) opLeaseDir(c *conn, _ *Txn, who *auth.Identity, q *wire.Request) (*wire.Response, error) {
	now := time.Now()
	if n.leases.renew(c, q.Ino, now) {
		return &wire.Response{Counters: []uint64{uint64(n.leases.term), 0}}, nil
	}
	what := fmt.Sprintf("inode %d", q.Ino)
	a := n.ns.attr(nil, q.Ino)
	if a == nil {
		return nil, fail(wire.ErrCodeNotFound, "%s: no such directory", what)
	}
	// Reachability first, as for every inode-addressed request: the type
	// of an inode the caller cannot reach is none of its business.
	if !n.reachable(nil, who, q.Ino) {
		return nil, denied(who, what)
	}
	if a.Type != wire.TypeDir {
		return nil, fail(wire.ErrCodeNotDir, "%s: not a directory", what)
	}
	// The listing is what a readdir shows.
	if !may(who, a, permRead|permSearch) {
		return nil, denied(who, what)
	}
	no := &wire.Response{Counters: []uint64{0, 0}}
	if !n.leases.mayGrant(c, q.Ino, now) || n.pendingIn(c, q.Ino) {
		return no, nil
	}
	in := n.ns.inodes[q.Ino]
	if in == nil || len(in.entries) > maxLeaseListing {
		return no, nil
	}
	out := make([]string, 0, len(in.entries))
	for name := range in.entries {
		out = append(out, name)
	}
	n.leases.grant(c, q.Ino, now)
	return &wire.Response{Counters: []uint64{uint64(n.leases.term), 1}, Paths: out}, nil
}

// pendingIn reports whether a transaction of another connection may be
// changing dir's entries: one that holds a lock on dir (adding or
// removing a name takes one until the transaction has ended) has changes
// the committed listing does not show yet.
func (n *Namenode) pendingIn(c *conn, dir uint64) bool {
	l := n.locks.m[inodeKey(dir)]
	if l == nil {
		return false
	}
	if l.owner != nil && l.owner.key.conn != c {
		return true
	}
	for h := range l.shared {
		if h.key.conn != c {
			return true
		}
	}
	return false
}

// admitEntry is asked before tx adds a name to dir.
func (n *Namenode) admitEntry(tx *Txn, dir uint64) error {
	return n.leases.admit(tx.key.conn, dir, time.Now())
}

// retryAfter is a request that cannot proceed before at; the RPC server
// runs it again then, without holding up the connection's other requests.
type retryAfter struct {
	at  time.Time
	why string
}

func (r *retryAfter) Error() string { return "retry after " + r.at.String() + ": " + r.why }
