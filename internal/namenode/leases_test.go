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
	if err := newDirLeases(t0, true).admit(a, 7, t0); err != nil {
		t.Fatalf("addition at the start of a new namespace: %v", err)
	}
	l := newDirLeases(t0, false)
	var ra *retryAfter
	if err := l.admit(a, 7, t0); !errors.As(err, &ra) || !ra.at.Equal(t0.Add(leaseTerm)) {
		t.Fatalf("addition during start-up grace: %v", err)
	}
	now := t0.Add(leaseTerm)
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
	if !l.renew(a, 7, now.Add(leaseTerm/2)) {
		t.Fatal("running lease not renewed")
	}
	end := now.Add(leaseTerm/2 + leaseTerm)
	if err := l.admit(b, 7, now.Add(leaseTerm)); !errors.As(err, &ra) || !ra.at.Equal(end) {
		t.Fatalf("other connection's addition: %v, want to wait until %v", err, end)
	}
	if l.renew(a, 7, now.Add(leaseTerm)) {
		t.Fatal("lease renewed while another connection waits for it")
	}
	if err := l.admit(b, 7, end); err != nil {
		t.Fatalf("addition after the lease ended: %v", err)
	}
	if l.mayGrant(a, 7, end.Add(leaseCoolOff/2)) || !l.mayGrant(a, 7, end.Add(leaseCoolOff)) {
		t.Fatal("cool-off after a wait not applied as long as it should")
	}
	l.dropConn(a)
	if l.held() != 0 {
		t.Fatalf("%d leases after the holder's connection closed", l.held())
	}
	// Sweeping: a client leasing one directory after another.
	for i := uint64(0); i < 5000; i++ {
		l.grant(a, 100+i, now.Add(time.Duration(i)*leaseTerm))
	}
	if l.held() > 2048 {
		t.Fatalf("%d leases held after sweeps, want the ended ones gone", l.held())
	}
}
