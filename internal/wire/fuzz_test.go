package wire

import (
	"bufio"
	"bytes"
	"reflect"
	"testing"
)

func FuzzDecodeDataReq(f *testing.F) {
	f.Add(EncodeDataReq(&DataReq{Op: DataWrite, Block: 7, Length: 3, CRC: 9, Chain: []Hop{{Addr: "127.0.0.1:1", Block: 4, Ticket: []byte{1, 2}}}}))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		q, err := DecodeDataReq(b)
		if err != nil {
			return
		}
		// What decodes must re-encode to an equal request (varints
		// may be non-minimal in the input, so compare decoded values).
		q2, err := DecodeDataReq(EncodeDataReq(q))
		if err != nil || !reflect.DeepEqual(q, q2) {
			t.Fatalf("round trip: %+v != %+v (%v)", q, q2, err)
		}
	})
}

func FuzzReadDataResp(f *testing.F) {
	var buf bytes.Buffer
	_ = WriteDataResp(&buf, &DataResp{Status: ErrCodeInvalid, Msg: "x", Bad: []uint64{1, 2}})
	f.Add(buf.Bytes())
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = ReadDataResp(bufio.NewReader(bytes.NewReader(b)))
	})
}

func FuzzDecodeRequest(f *testing.F) {
	f.Add(AppendRequest(nil, &Request{Op: OpCreate, Txn: 1, Path: "/a", Mode: 0644, Extents: []Extent{{Index: 1, Count: 2, Replicas: []Run{{1, 2}}, CRC: []uint32{1, 2}}}}))
	f.Add(AppendRequest(nil, &Request{Op: OpRegister, Node: &NodeInfo{ID: 1, Identity: "x"}}))
	f.Add(AppendRequest(nil, &Request{Op: OpRegister, Node: &NodeInfo{ID: 1, Identity: "x", Enabled: true, Namespace: "ns"}}))
	f.Add(AppendRequest(nil, &Request{Op: OpHeartbeat, Node: &NodeInfo{ID: 1, Identity: "x", Capacity: 1 << 30, UsedBytes: 4096}, Index: 5}))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeRequest(b)
		if err != nil {
			return
		}
		if _, err := DecodeRequest(AppendRequest(nil, r)); err != nil {
			t.Fatalf("re-encoded request does not decode: %v", err)
		}
	})
}

func FuzzDecodeResponse(f *testing.F) {
	f.Add(AppendResponse(nil, &Response{Code: OK, Attr: &Attr{Ino: 3, Type: TypeFile}, Entries: []DirEntry{{Name: "a", Ino: 1, Type: TypeDir}}}))
	f.Add(AppendResponse(nil, &Response{Code: OK, Entries: []DirEntry{{Name: "a", Ino: 1, Type: TypeDir, Attr: &Attr{Ino: 1, Type: TypeDir}}}, Counters: []uint64{1}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeResponse(b)
		if err != nil {
			return
		}
		if _, err := DecodeResponse(AppendResponse(nil, r)); err != nil {
			t.Fatalf("re-encoded response does not decode: %v", err)
		}
	})
}

func TestFrameRejectsHugeLength(t *testing.T) {
	b := []byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0}
	if _, _, _, err := ReadFrame(bytes.NewReader(b), nil); err == nil {
		t.Fatal("4 GiB frame length accepted")
	}
}

func TestRequestRoundTrip(t *testing.T) {
	in := &Request{Op: OpSetBlocks, Txn: 42, Ino: 9, Size: 1 << 40, Extents: []Extent{{Index: 3, Count: 2, Replicas: []Run{{1, 100}, {2, 200}}, CRC: []uint32{7, 8}}}}
	out, err := DecodeRequest(AppendRequest(nil, in))
	if err != nil {
		t.Fatal(err)
	}
	if out.Txn != 42 || out.Ino != 9 || out.Size != 1<<40 || len(out.Extents) != 1 || out.Extents[0].Replicas[1].Start != 200 || out.Extents[0].CRC[1] != 8 {
		t.Fatalf("round trip mismatch: %+v", out)
	}
}
