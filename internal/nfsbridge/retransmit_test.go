package nfsbridge

import "testing"

func TestSeenCallsWindow(t *testing.T) {
	var s seenCalls
	if s.retransmitted(7) {
		t.Fatal("a first call taken for a retransmission")
	}
	if !s.retransmitted(7) {
		t.Fatal("a retransmission not recognised")
	}
	// retransmitWindow later calls push xid 7 out of the window.
	for x := uint32(100); x < 100+retransmitWindow; x++ {
		if s.retransmitted(x) {
			t.Fatalf("call %d taken for a retransmission", x)
		}
	}
	if s.retransmitted(7) {
		t.Fatal("an xid out of the window taken for a retransmission")
	}
	if !s.retransmitted(100 + retransmitWindow - 1) {
		t.Fatal("the latest call's retransmission not recognised")
	}
	if len(s.set) != retransmitWindow {
		t.Fatalf("%d xids remembered, want %d", len(s.set), retransmitWindow)
	}
}
