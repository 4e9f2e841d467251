package datanode

import (
	"bytes"
	"testing"
)

// TestApplyJournal: a journaled write applied to a block that lost it
// (entry and data of the version before), to one whose entry was torn
// from its data (entry new, data old), to one that holds it already, to
// one extended further since, and to a slot of another generation: the
// first two are restored to the version, the others left as they were.
func TestApplyJournal(t *testing.T) {
	st := newExtVolume(t)
	const gen = 7
	v1 := pattern(5000, 1)
	add := pattern(64, 9)
	v2 := append(bytes.Clone(v1), add...)
	crc2 := Checksum(v2, extBS)
	more := pattern(200, 3)
	v3 := append(bytes.Clone(v2), more...)
	check := func(what string, block uint64, want []byte) {
		t.Helper()
		got := readAll(t, st, block)
		if !bytes.Equal(got[:len(want)], want) || !bytes.Equal(got[len(want):], make([]byte, extBS-len(want))) {
			t.Fatalf("%s: block %d does not hold the expected version", what, block)
		}
	}
	for b := uint64(0); b < 6; b++ {
		if err := st.Write(b, v1, Checksum(v1, extBS), gen); err != nil {
			t.Fatal(err)
		}
	}
	// 0: the write was lost whole.
	if err := st.ApplyJournal(0, len(v1), add, crc2, gen); err != nil {
		t.Fatalf("lost write: %v", err)
	}
	check("lost write", 0, v2)
	// 1: the entry says v2, the data is v1's (a torn write).
	if err := st.record(1, crc2, gen, uint32(extBS-onDisk(len(v2), extBS))); err != nil {
		t.Fatal(err)
	}
	if err := st.ApplyJournal(1, len(v1), add, crc2, gen); err != nil {
		t.Fatalf("torn write: %v", err)
	}
	check("torn write", 1, v2)
	// 2: applied already; 3: extended further since.
	if err := st.Extend(2, len(v1), add, Checksum(v1, extBS), crc2, gen, 0); err != nil {
		t.Fatal(err)
	}
	if err := st.Extend(3, len(v1), add, Checksum(v1, extBS), crc2, gen, 0); err != nil {
		t.Fatal(err)
	}
	if err := st.Extend(3, len(v2), more, crc2, Checksum(v3, extBS), gen, 0); err != nil {
		t.Fatal(err)
	}
	for _, b := range []uint64{2, 3} {
		if err := st.ApplyJournal(b, len(v1), add, crc2, gen); err != nil {
			t.Fatalf("block %d: %v", b, err)
		}
	}
	check("applied already", 2, v2)
	check("extended since", 3, v3)
	// 4: the slot holds another allocation now.
	if err := st.ApplyJournal(4, len(v1), add, crc2, gen+1); err != nil {
		t.Fatal(err)
	}
	check("other generation", 4, v1)
	// 5: a write that does not give the recorded checksum (the block's
	// earlier bytes damaged) is refused and leaves the block alone.
	if err := st.ApplyJournal(5, len(v1), pattern(64, 5), crc2, gen); err == nil {
		t.Fatal("journaled write with a wrong checksum applied")
	}
	check("refused write", 5, v1)
}
