package meta

import (
	"reflect"
	"testing"
)

// TestLogFormatJournalRoundTrip: a batch holding journaled writes is
// written in format 3 and decodes to itself; the same batch without them
// is still written in format 2, as before format 3 existed.
func TestLogFormatJournalRoundTrip(t *testing.T) {
	in := []*Change{{
		PutInodes: []Inode{{Ino: 7, Type: TypeFile, Mode: 0o644, User: "alice", Group: "staff", Size: 1000, Nlink: 1, Rep: 2, Seq: 3}},
		Blocks:    map[uint64][]Extent{7: {{Index: 0, Count: 1, Replicas: []Run{{Node: 1, Start: 10}, {Node: 2, Start: 20}}, CRC: []uint32{0xabc}, Gen: 5}}},
		Journal:   []JournalWrite{{Ino: 7, Index: 0, Gen: 5, Offset: 936, CRC: 0xabc, Data: []byte("sixty-four bytes appended")}, {Ino: 7, Index: 3, Gen: 1 << 40, Offset: 961, CRC: 0xffffffff, Data: []byte{0, 1, 2}}},
	}, {DelInodes: []uint64{9}}}
	b := EncodeChanges(in)
	if b[0] != 0 || b[1] != LogFormatJournal {
		t.Fatalf("record starts % x, want the version marker and format %d", b[:2], LogFormatJournal)
	}
	out, err := DecodeChanges(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, out) {
		t.Errorf("decoded\n%+v\nwant\n%+v", out[0], in[0])
	}
	in[0].Journal = nil
	if b := EncodeChanges(in); b[1] != LogFormat {
		t.Errorf("batch without journaled writes written in format %d, want %d", b[1], LogFormat)
	}
	if _, err := DecodeChanges(b[:len(b)-1]); err == nil {
		t.Error("truncated format 3 record decoded")
	}
}
