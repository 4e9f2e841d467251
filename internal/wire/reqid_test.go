package wire

import (
	"bytes"
	"testing"
)

// TestReqIDOptional: a request id travels when set, and encodings without
// one (those of clients before request ids) are what they were and
// decode to 0.
func TestReqIDOptional(t *testing.T) {
	q := &Request{Op: OpCreate, Txn: 7, Path: "/a", Node: &NodeInfo{ID: 1, Identity: "x"}}
	old := AppendRequest(nil, q)
	q.ReqID = 0x0123456789abcdef
	r, err := DecodeRequest(AppendRequest(nil, q))
	if err != nil || r.ReqID != q.ReqID || r.Path != "/a" || r.Node == nil || r.Node.Identity != "x" {
		t.Fatalf("request with an id: %+v, %v", r, err)
	}
	if r, err := DecodeRequest(old); err != nil || r.ReqID != 0 {
		t.Fatalf("request without an id: %+v, %v", r, err)
	}

	d := &DataReq{Op: DataRead, Block: 9, Ticket: []byte{1}}
	oldData := EncodeDataReq(d)
	d.ReqID = 42
	withID := EncodeDataReq(d)
	if !bytes.HasPrefix(withID, oldData) || len(withID) != len(oldData)+8 {
		t.Fatalf("a data request's id is not 8 bytes appended: %x vs %x", withID, oldData)
	}
	if got, err := DecodeDataReq(withID); err != nil || got.ReqID != 42 || got.Block != 9 {
		t.Fatalf("data request with an id: %+v, %v", got, err)
	}
	if got, err := DecodeDataReq(oldData); err != nil || got.ReqID != 0 {
		t.Fatalf("data request without an id: %+v, %v", got, err)
	}
	if FormatReqID(42) != "000000000000002a" {
		t.Fatalf("FormatReqID(42) = %q", FormatReqID(42))
	}
}
