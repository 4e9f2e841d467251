package namenode

import (
	"errors"
	"testing"
	"time"
)

// TestDirLeasesTable: the lease table's rules without a network: the
// holder adds freely, another connection waits until the lease's end and
// the directory then cools off; a starting namenode delays additions by
// one term; ended leases are swept as the table grows.
func TestDirLeasesTable(t *testing.T) {
	a, b := &conn{}, &conn{}
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
	if err := l.admit(b, 7, end); err != nil {
		t.Fatalf("addition after the lease ended: %v", err)
	}
	if l.mayGrant(a, 7, end.Add(l.coolOff/2)) || !l.mayGrant(a, 7, end.Add(l.coolOff)) {
		t.Fatal("cool-off after a wait not applied as long as it should")
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
	// Sweeping: a client leasing one directory after another.
	for i := uint64(0); i < 5000; i++ {
		l.grant(a, 100+i, now.Add(time.Duration(i)*DefaultLeaseTerm))
	}
	if l.held() > 2048 {
		t.Fatalf("%d leases held after sweeps, want the ended ones gone", l.held())
	}
}
