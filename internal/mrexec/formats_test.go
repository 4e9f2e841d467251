package mrexec

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// Cutting a file of fixed-size records at any offsets hands every record
// to exactly one split, whole.
func TestFeedFixedOwnsEachRecordOnce(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for iter := 0; iter < 300; iter++ {
		rs := 1 + r.IntN(40)
		data := make([]byte, rs*r.IntN(30))
		for i := range data {
			data[i] = byte(r.Uint32())
		}
		size := int64(len(data))
		cuts := []int64{0, size}
		for n := r.IntN(8); n > 0; n-- {
			cuts = append(cuts, r.Int64N(size+1))
		}
		slices.Sort(cuts)
		cuts = slices.Compact(cuts)
		var got bytes.Buffer
		var records int64
		for i := 0; i+1 < len(cuts); i++ {
			e := &exec1{t: Task{Start: cuts[i], End: cuts[i+1], Format: FormatFixed, RecordSize: rs}}
			before := got.Len()
			if err := e.feedSplit(bytes.NewReader(data), size, &got, 16); err != nil {
				t.Fatal(err)
			}
			if (got.Len()-before)%rs != 0 {
				t.Fatalf("record size %d, cuts %v: split %d got a partial record", rs, cuts, i)
			}
			records += e.res.Counters.MapInRecords
		}
		if !bytes.Equal(got.Bytes(), data) || records != size/int64(rs) {
			t.Fatalf("record size %d, cuts %v: got %d bytes, %d records; want %d, %d", rs, cuts, got.Len(), records, size, size/int64(rs))
		}
	}
	e := &exec1{t: Task{Start: 0, End: 10, Format: FormatFixed, RecordSize: 4, Input: "/f"}}
	if err := e.feedSplit(bytes.NewReader(make([]byte, 10)), 10, &bytes.Buffer{}, 16); err == nil || !strings.Contains(err.Error(), "whole number") {
		t.Fatalf("a file of 2.5 records: %v", err)
	}
}

// A length-prefixed file is fed whole; a damaged length fails the task
// with the offset named instead of feeding a cut record.
func TestFeedLengthPrefixed(t *testing.T) {
	var data []byte
	for i := 0; i < 50; i++ {
		rec := bytes.Repeat([]byte{byte(i)}, i*7)
		data = binary.BigEndian.AppendUint32(data, uint32(len(rec)))
		data = append(data, rec...)
	}
	e := &exec1{t: Task{Start: 0, End: int64(len(data)), Format: FormatLengthPrefixed, Input: "/f"}}
	var got bytes.Buffer
	if err := e.feedSplit(bytes.NewReader(data), int64(len(data)), &got, 16); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), data) || e.res.Counters.MapInRecords != 50 {
		t.Fatalf("fed %d bytes, %d records", got.Len(), e.res.Counters.MapInRecords)
	}
	bad := append(bytes.Clone(data), 0, 0, 1, 0, 'x') // says 256 bytes, holds 1
	e = &exec1{t: Task{Start: 0, End: int64(len(bad)), Format: FormatLengthPrefixed, Input: "/f"}}
	if err := e.feedSplit(bytes.NewReader(bad), int64(len(bad)), &bytes.Buffer{}, 16); err == nil || !strings.Contains(err.Error(), "runs past the end") {
		t.Fatalf("a truncated last record: %v", err)
	}
}
