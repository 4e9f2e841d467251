package wire

import (
	"reflect"
	"testing"
)

// TestNodeInfoNamespace: the namespace id travels with a node; a node
// without one encodes exactly as before the field existed (the flag byte
// then is the old Enabled bool), so old encodings still decode.
func TestNodeInfoNamespace(t *testing.T) {
	for _, n := range []NodeInfo{
		{ID: 3, Identity: "x", Blocks: 9, Enabled: true, Namespace: "0123456789abcdef0123456789abcdef"},
		{ID: 3, Identity: "x", Blocks: 9, Enabled: false, Namespace: "ns"},
		{ID: 3, Identity: "x", Blocks: 9, Enabled: true},
	} {
		q, err := DecodeRequest(AppendRequest(nil, &Request{Op: OpRegister, Node: &n}))
		if err != nil || !reflect.DeepEqual(*q.Node, n) {
			t.Fatalf("round trip of %+v: %+v, %v", n, q.Node, err)
		}
	}
	// The encoding before the namespace field: ..., Alive bool, Enabled bool.
	var e Enc
	e.U8(uint8(OpRegister))
	e.Uv(rNode)
	e.Uv(7)
	for _, s := range []string{"id", "c", "a", "", "h"} {
		e.Str(s)
	}
	e.Uv(65536)
	e.Uv(100)
	e.Uv(1)
	e.Bool(true)
	e.Bool(true)
	q, err := DecodeRequest(e.B)
	if err != nil || q.Node.ID != 7 || !q.Node.Enabled || !q.Node.Alive || q.Node.Namespace != "" {
		t.Fatalf("old encoding: %+v, %v", q, err)
	}
	if got := AppendRequest(nil, &Request{Op: OpRegister, Node: &NodeInfo{ID: 7, Identity: "id", Cluster: "c", Addr: "a", Host: "h", Blocksize: 65536, Blocks: 100, Used: 1, Alive: true, Enabled: true}}); !reflect.DeepEqual(got, e.B) {
		t.Fatalf("a node without namespace encodes differently than before:\n%x\n%x", got, e.B)
	}
}

// TestNodeInfoBytes: a sparse volume's capacity and bytes used travel
// with a node, with or without a namespace; a node without them encodes as
// before (TestNodeInfoNamespace).
func TestNodeInfoBytes(t *testing.T) {
	for _, n := range []NodeInfo{
		{ID: 3, Identity: "x", Blocks: 1 << 21, Enabled: true, Capacity: 8 << 30, UsedBytes: 12345 << 12},
		{ID: 3, Identity: "x", Blocks: 9, Namespace: "ns", Capacity: 1 << 20},
		{ID: 3, Identity: "x", Blocks: 9, UsedBytes: 4096},
	} {
		q, err := DecodeRequest(AppendRequest(nil, &Request{Op: OpHeartbeat, Node: &n, Index: 77}))
		if err != nil || !reflect.DeepEqual(*q.Node, n) || q.Index != 77 {
			t.Fatalf("round trip of %+v: %+v, %v", n, q.Node, err)
		}
	}
}
