package namenode

import "testing"

func TestFreeQueueWaitsForOldTxnsAndDurability(t *testing.T) {
	var f freeQueue
	if !f.empty() || f.due(100, 100) != nil {
		t.Fatal("new queue not empty")
	}
	f.add(pendingFree{epoch: 1, needSeq: 1, runs: []run{{node: 1, start: 0, count: 2}}})
	f.add(pendingFree{epoch: 2, needSeq: 3, runs: []run{{node: 1, start: 5, count: 1}, {node: 2, start: 7, count: 1}}})
	f.add(pendingFree{epoch: 3, needSeq: 2, runs: []run{{node: 2, start: 9, count: 4}}})

	// A transaction that began at epoch 0 is still open: nothing is due.
	if rs := f.due(0, 10); len(rs) != 0 {
		t.Fatalf("due under an older open transaction: %v", rs)
	}
	// The first batch is not durable yet: nothing is due.
	if rs := f.due(10, 0); len(rs) != 0 {
		t.Fatalf("due before durable: %v", rs)
	}
	if rs := f.due(10, 1); len(rs) != 1 || rs[0].start != 0 {
		t.Fatalf("due(10, 1) = %v, want the first run", rs)
	}
	// The third is durable (2) but waits behind the second (3): order kept.
	if rs := f.due(10, 2); len(rs) != 0 {
		t.Fatalf("due(10, 2) = %v, want none (the second is not durable)", rs)
	}
	// Epoch bound: the second is due, the third (epoch 3) not yet.
	if rs := f.due(2, 3); len(rs) != 2 || rs[0].start != 5 || rs[1].start != 7 {
		t.Fatalf("due(2, 3) = %v, want the second's two runs", rs)
	}
	if f.empty() {
		t.Fatal("third entry lost")
	}
	if rs := f.due(3, 3); len(rs) != 1 || rs[0].count != 4 || !f.empty() {
		t.Fatalf("due(3, 3) = %v, empty %v", rs, f.empty())
	}
}
