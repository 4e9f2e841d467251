package namenode

import "testing"

func TestBlockMapAllocContiguousAndFull(t *testing.T) {
	m := newBlockMap(300)
	s, n := m.alloc(128, 0)
	if s != 0 || n != 128 {
		t.Fatalf("first run = %d+%d", s, n)
	}
	s, n = m.alloc(128, 128)
	if s != 128 || n != 128 {
		t.Fatalf("hinted run = %d+%d", s, n)
	}
	m.clear(10, 5)
	s, n = m.alloc(100, 0)
	if s != 256 || n != 44 {
		t.Fatalf("tail run = %d+%d", s, n)
	}
	s, n = m.alloc(100, 0)
	if s != 10 || n != 5 {
		t.Fatalf("wrapped run = %d+%d", s, n)
	}
	if _, n = m.alloc(1, 0); n != 0 || m.free() != 0 {
		t.Fatalf("full map allocated %d, free %d", n, m.free())
	}
}
