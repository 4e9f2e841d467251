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
// it got with the lease and adds the names it creates itself. Only a
// client that may add names to the directory itself (write and search
// permission) gets or renews a lease: one that may only read it could
// otherwise hold up the creates of those who write there.
//
// There is no callback channel to clients (a client reads its connection
// only while it waits for an answer), so a lease is not recalled but
// waited out: another client's request that would add a name to a leased
// directory ends the lease's renewals and is re-run when the lease has
// expired (retryAfter), at most one term later. After that the directory
// gets no new lease for the cool-off (ten terms), so directories several
// clients write to fall back to plain lookups; while the waiting request
// holds its lock on the directory, no lease is granted on it either
// (pendingIn), so a request waits out one lease at most. The holder's
// user loses all its leases with it (recall): leasing many directories
// does not multiply the waits it can cause. A lease whose
// connection closed is no longer renewed but still runs out its term (the
// client may not have noticed yet; it drops its leases when it
// reconnects).
//
// The holder counts its lease from before it sent the request and the
// namenode from when it granted it, so the holder's lease always ends
// first. A namenode that starts admits additions only after one term
// (leases its predecessor granted have ended by then); a request that
// waits for that also recalls a lease granted since, so it waits for
// whichever ends last, once.
//
// Lock discipline: guarded by Namenode.mu.
type dirLeases struct {
	term    time.Duration
	coolOff time.Duration
	m       map[uint64]*dirLease
	cold    map[uint64]time.Time // no lease on these directories until then
	// coldUsers: users one of whose leases another user had to wait for
	// get no lease until then.
	coldUsers map[leaseUser]time.Time
	grace     time.Time // additions wait until then (start-up)
	sweepAt   int       // table size at which ended entries are swept
	putOff    uint64    // additions put off (retryAfter) so far, for the namenode's stats
}

type dirLease struct {
	holder   *conn
	user     leaseUser // the holder's
	expires  time.Time
	recalled bool // another client waits: no renewal
}

const (
	// DefaultLeaseTerm is the length of a directory lease unless the
	// namenode is configured otherwise (Config.LeaseTerm).
	DefaultLeaseTerm = 300 * time.Millisecond
	// leaseCoolOffTerms is the cool-off after a wait, in lease terms.
	leaseCoolOffTerms = 10
	// maxLeaseListing bounds the listing sent with a new lease; larger
	// directories get no lease.
	maxLeaseListing = 4096
)

// newDirLeases starts the lease table of a namenode starting now, whose
// leases last term; fresh: its namespace is new, so there is no
// predecessor's lease to wait out.
func newDirLeases(now time.Time, term time.Duration, fresh bool) *dirLeases {
	l := &dirLeases{term: term, coolOff: leaseCoolOffTerms * term, m: map[uint64]*dirLease{},
		cold: map[uint64]time.Time{}, coldUsers: map[leaseUser]time.Time{}, grace: now.Add(term), sweepAt: 1024}
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

// leaseUser is who a lease counts against for the cool-off: the user of
// the holder's connection, so that more connections buy no more waits.
// At security level none nobody is identified (and everybody may do
// anything): each connection is its own user.
type leaseUser struct {
	name string
	conn *conn // only when the connection has no identity
}

func userOf(c *conn) leaseUser {
	if c.who == nil {
		return leaseUser{conn: c}
	}
	return leaseUser{name: c.who.User}
}

// mayGrant reports whether dir can be leased to c now (nobody else holds
// it, neither the directory nor c's user is cooling off).
func (l *dirLeases) mayGrant(c *conn, dir uint64, now time.Time) bool {
	if coolingOff(l.cold, dir, now) || coolingOff(l.coldUsers, userOf(c), now) {
		return false
	}
	d := l.m[dir]
	return d == nil || d.holder == c || !now.Before(d.expires)
}

// coolingOff reports whether k's cool-off in cold runs at now, and
// forgets it once it has ended.
func coolingOff[K comparable](cold map[K]time.Time, k K, now time.Time) bool {
	until, ok := cold[k]
	if ok && !now.Before(until) {
		delete(cold, k)
		return false
	}
	return ok
}

func (l *dirLeases) grant(c *conn, dir uint64, now time.Time) {
	if len(l.m)+len(l.cold)+len(l.coldUsers) >= l.sweepAt {
		l.sweep(now)
	}
	l.m[dir] = &dirLease{holder: c, user: userOf(c), expires: now.Add(l.term)}
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
	sweepCold(l.cold, now)
	sweepCold(l.coldUsers, now)
	l.sweepAt = max(1024, 2*(len(l.m)+len(l.cold)+len(l.coldUsers)))
}

func sweepCold[K comparable](cold map[K]time.Time, now time.Time) {
	for k, until := range cold {
		if !now.Before(until) {
			delete(cold, k)
		}
	}
}

// admit is asked before c adds a name to dir. It returns a retryAfter
// while another client's lease or the start-up grace runs, until the
// later of their ends: the lease is recalled at once (no renewal), so the
// addition waits one term at most, even when it arrived during the grace.
func (l *dirLeases) admit(c *conn, dir uint64, now time.Time) error {
	var wait *retryAfter
	if now.Before(l.grace) {
		wait = &retryAfter{at: l.grace, why: "namenode starting: earlier directory leases may still run"}
	}
	if d := l.m[dir]; d != nil && d.holder != c {
		if !now.Before(d.expires) {
			delete(l.m, dir)
		} else {
			l.recall(dir, d, userOf(c), now)
			if wait == nil || d.expires.After(wait.at) {
				wait = &retryAfter{at: d.expires, why: fmt.Sprintf("directory %d is leased to another client", dir)}
			}
		}
	}
	if wait == nil {
		return nil
	}
	l.putOff++
	return wait
}

// recall stops the renewals of d, the running lease on dir, because
// another client (of user by) waits for it, and lets the directory cool
// off after it. When by is another user, it stops those of every other
// lease of d's user too, and that user gets no new lease until the
// cool-off after they have all ended: however many directories a user
// leases, it holds up other users' additions for one term per cool-off
// in all, not one term per directory. (A user whose connections wait for
// each other only slows itself.)
func (l *dirLeases) recall(dir uint64, d *dirLease, by leaseUser, now time.Time) {
	if !d.recalled {
		d.recalled = true
		l.cold[dir] = d.expires.Add(l.coolOff)
	}
	if by == d.user || coolingOff(l.coldUsers, d.user, now) {
		return // nothing more to recall: no lease is granted while cooling off
	}
	l.coldUsers[d.user] = now.Add(l.term + l.coolOff)
	for _, e := range l.m {
		if e.user == d.user {
			e.recalled = true
		}
	}
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
	// A lease holds up others' additions: only those who may add names
	// themselves get one (or keep it: the mode may have changed since).
	if !may(who, a, permWrite|permSearch) {
		return no, nil
	}
	now := time.Now()
	if n.leases.renew(c, q.Ino, now) {
		return &wire.Response{Counters: []uint64{uint64(n.leases.term), 0}}, nil
	}
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
