package namenode

import (
	"errors"
	"testing"
	"time"

	"github.com/plasmafs/plasma/internal/auth"
)

// TestDirLeasesTable: the lease table's rules without a network: the
// holder adds freely, another connection waits until the lease's end and
// the directory then cools off; a starting namenode delays additions by
// one term; a wait recalls all the holder's leases and its user gets none
// for the cool-off; ended leases are swept as the table grows.
func TestDirLeasesTable(t *testing.T) {
	user := func(name string) *conn { return &conn{who: &auth.Identity{User: name}} }
	a, b, c, a2 := user("a"), user("b"), user("c"), user("a")
	t0 := time.Now()
	if err := newDirLeases(t0, DefaultLeaseTerm, true).admit(a, 7, t0); err != nil {
		t.Fatalf("addition at the start of a new namespace: %v", err)
	}
	l := newDirLeases(t0, DefaultLeaseTerm, false)
	var ra *retryAfter
	if err := l.admit(a, 7, t0); !errors.As(err, &ra) || !ra.at.Equal(t0.Add(DefaultLeaseTerm)) {
		t.Fatalf("addition during start-up grace: %v", err)
	}
	now := t0.Add(DefaultLeaseTerm)
	if !l.mayGrant(a, 7, now) {
		t.Fatal("free directory not grantable")
	}
	l.grant(a, 7, now)
	l.grant(a, 9, now.Add(DefaultLeaseTerm/2))
	if l.mayGrant(b, 7, now) {
		t.Fatal("held directory grantable to another connection")
	}
	if err := l.admit(a, 7, now); err != nil {
		t.Fatalf("holder's addition: %v", err)
	}
	if !l.renew(a, 7, now.Add(DefaultLeaseTerm/2)) {
		t.Fatal("running lease not renewed")
	}
	end := now.Add(DefaultLeaseTerm/2 + DefaultLeaseTerm)
	if err := l.admit(b, 7, now.Add(DefaultLeaseTerm)); !errors.As(err, &ra) || !ra.at.Equal(end) {
		t.Fatalf("other connection's addition: %v, want to wait until %v", err, end)
	}
	if l.renew(a, 7, now.Add(DefaultLeaseTerm)) {
		t.Fatal("lease renewed while another connection waits for it")
	}
	// The wait recalled a's lease on 9 too; a (on any connection) gets
	// no lease anywhere until the cool-off after its leases have ended.
	if l.renew(a, 9, now.Add(DefaultLeaseTerm)) {
		t.Fatal("another lease of the holder renewed while a connection waits for one of its leases")
	}
	userCold := now.Add(2*DefaultLeaseTerm + l.coolOff)
	for _, x := range []*conn{a, a2} {
		if l.mayGrant(x, 10, userCold.Add(-time.Millisecond)) {
			t.Fatal("a user another connection waited for was granted a lease before its cool-off ended")
		}
	}
	if !l.mayGrant(b, 10, now.Add(DefaultLeaseTerm)) {
		t.Fatal("another user cools off with the holder")
	}
	if err := l.admit(b, 7, end); err != nil {
		t.Fatalf("addition after the lease ended: %v", err)
	}
	if l.mayGrant(c, 7, end.Add(l.coolOff/2)) || !l.mayGrant(c, 7, end.Add(l.coolOff)) {
		t.Fatal("cool-off of the directory after a wait not applied as long as it should")
	}
	if !l.mayGrant(a2, 10, userCold) {
		t.Fatal("the holder's cool-off did not end")
	}
	l.dropConn(a)
	if l.held() != 0 {
		t.Fatalf("%d leases after the holder's connection closed", l.held())
	}
	// During the start-up grace a lease granted meanwhile is recalled by
	// the first addition, which waits for whichever ends last, once.
	g := newDirLeases(t0, DefaultLeaseTerm, false)
	g.grant(a, 8, t0)
	if !g.renew(a, 8, t0.Add(DefaultLeaseTerm/2)) {
		t.Fatal("lease granted during the grace not renewed")
	}
	last := t0.Add(DefaultLeaseTerm/2 + DefaultLeaseTerm)
	if err := g.admit(b, 8, t0.Add(DefaultLeaseTerm/2)); !errors.As(err, &ra) || !ra.at.Equal(last) {
		t.Fatalf("addition during the grace to a leased directory: %v, want to wait until %v", err, last)
	}
	if g.renew(a, 8, t0.Add(DefaultLeaseTerm*3/4)) {
		t.Fatal("lease renewed during the grace while another connection waits for it")
	}
	if err := g.admit(b, 8, last); err != nil || g.putOff != 1 {
		t.Fatalf("addition once the lease and the grace ended: %v, %d waits counted, want 1", err, g.putOff)
	}
	// A user's connections waiting for each other cool off the directory
	// only.
	u := newDirLeases(t0, DefaultLeaseTerm, true)
	u.grant(a, 12, t0)
	u.grant(a, 13, t0)
	if err := u.admit(a2, 12, t0); !errors.As(err, &ra) {
		t.Fatalf("addition by another connection of the holder's user: %v, want a wait", err)
	}
	if !u.renew(a, 13, t0) || !u.mayGrant(a, 14, t0) || u.mayGrant(c, 12, t0.Add(DefaultLeaseTerm)) {
		t.Fatal("a wait among one user's connections: want only the directory cooled off")
	}
	// Sweeping: a client leasing one directory after another.
	for i := uint64(0); i < 5000; i++ {
		l.grant(a, 100+i, now.Add(time.Duration(i)*DefaultLeaseTerm))
	}
	if l.held() > 2048 {
		t.Fatalf("%d leases held after sweeps, want the ended ones gone", l.held())
	}
}
