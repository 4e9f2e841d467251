package namenode

import "testing"

// TestInoCounter: numbers are unique and increasing; the reservation is
// made before a number at or past the old limit is handed out; a counter
// restarted from the last reservation continues above every number given.
func TestInoCounter(t *testing.T) {
	c := inoCounter{next: 100, limit: 100}
	var reserved []uint64
	reserve := func(l uint64) { reserved = append(reserved, l) }
	seen := map[uint64]bool{}
	var last uint64
	for i := 0; i < 3*inoChunk; i++ {
		ino := c.take(reserve)
		if seen[ino] || ino < last {
			t.Fatalf("number %d after %d (seen before: %v)", ino, last, seen[ino])
		}
		seen[ino], last = true, ino
		if len(reserved) == 0 || ino >= reserved[len(reserved)-1] {
			t.Fatalf("number %d handed out beyond the reservation %v", ino, reserved)
		}
	}
	if len(reserved) != 3 {
		t.Fatalf("%d reservations for 3 chunks: %v", len(reserved), reserved)
	}
	restarted := inoCounter{next: reserved[len(reserved)-1], limit: reserved[len(reserved)-1]}
	if ino := restarted.take(reserve); seen[ino] || ino <= last {
		t.Fatalf("after a restart: %d, the last before was %d", ino, last)
	}
}
