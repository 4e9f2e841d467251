package meta

import (
	"errors"
	"reflect"
	"testing"
)

// TestLogFormatRoundTrip: a batch with every kind of change decodes to
// itself, and the record carries the current format version.
func TestLogFormatRoundTrip(t *testing.T) {
	in := []*Change{{
		PutInodes: []Inode{
			{Ino: 7, Type: TypeFile, Mode: 0o4755, User: "alice", Group: "staff", Size: 1 << 40, Nlink: 3,
				Mtime: -5, Ctime: 1700000000123456789, Rep: 3, Seq: 99},
			{Ino: 8, Type: TypeSymlink, Mode: 0o777, User: "root", Group: "root", Nlink: 1, Target: "../x"},
		},
		DelInodes:  []uint64{4, 1 << 60},
		PutEntries: []Entry{{EntryKey{1, "a"}, 7}, {EntryKey{2, "ü"}, 8}},
		DelEntries: []EntryKey{{1, "gone"}},
		Blocks: map[uint64][]Extent{
			7: {{Index: 0, Count: 2, Replicas: []Run{{Node: 1, Start: 10}, {Node: 2, Start: 20}}, CRC: []uint32{1, 2}, Gen: 5},
				{Index: 2, Count: 1, Replicas: []Run{{Node: 3, Start: 1 << 33}}, CRC: []uint32{0xffffffff}}},
			9: {},
		},
		PutNodes:    []Datanode{{ID: 3, Identity: "dn3", Blocks: 1 << 20, Enabled: true}, {ID: 4, Identity: "dn4"}},
		InoLimit:    65538,
		Touch:       map[uint64]int64{1: 42, 2: 43},
		Drains:      map[uint32]bool{3: true, 5: false},
		RemoveNodes: []RemovedDatanode{{ID: 6, Identity: "dn6"}},
	}, {DelInodes: []uint64{7}}}
	b := EncodeChanges(in)
	if b[0] != 0 || b[1] != LogFormat {
		t.Fatalf("record starts % x, want the version marker and format %d", b[:2], LogFormat)
	}
	out, err := DecodeChanges(b)
	if err != nil {
		t.Fatal(err)
	}
	in[0].Blocks[9] = []Extent{} // an empty list decodes as one
	if !reflect.DeepEqual(in, out) {
		t.Errorf("decoded\n%+v\nwant\n%+v", out[0], in[0])
	}
}

// TestLogFormatNewerRefused: a record of a later format is an error
// saying so, not a misread; so is a truncated one of this format.
func TestLogFormatNewerRefused(t *testing.T) {
	b := EncodeChanges([]*Change{{InoLimit: 5}})
	newer := append([]byte{0, LogFormatJournal + 1}, b[2:]...)
	if _, err := DecodeChanges(newer); !errors.Is(err, ErrNewerFormat) {
		t.Errorf("record of format %d: %v, want ErrNewerFormat", LogFormatJournal+1, err)
	}
	if _, err := DecodeChanges(b[:len(b)-1]); err == nil {
		t.Error("truncated record decoded")
	}
	if _, err := DecodeChanges(append(b, 0)); err == nil {
		t.Error("record with a trailing byte decoded")
	}
}
