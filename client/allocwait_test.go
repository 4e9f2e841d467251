package client

import (
	"fmt"
	"testing"

	"github.com/plasmafs/plasma/internal/wire"
)

// TestWaitsForDatanodesOnlyForPlacementRefusals: only the namenode's
// ErrUnavailable answer to a request that places data is waited for; an
// allocation that excludes a failed datanode, ENOSPC, a lost connection
// and other requests' refusals are returned at once.
func TestWaitsForDatanodesOnlyForPlacementRefusals(t *testing.T) {
	unavailable := &Error{Code: ErrorCode(wire.ErrCodeUnavailable), Msg: "only 0 datanodes are alive"}
	noSpace := &Error{Code: ErrorCode(wire.ErrCodeNoSpace), Msg: "out of space"}
	cases := []struct {
		name string
		q    wire.Request
		err  error
		want bool
	}{
		{"allocate", wire.Request{Op: wire.OpAllocate}, unavailable, true},
		{"allocate wrapped", wire.Request{Op: wire.OpAllocate}, fmt.Errorf("f: %w", unavailable), true},
		{"allocate preferring", wire.Request{Op: wire.OpAllocate, Pref: []string{"dn1"}}, unavailable, true},
		{"allocate excluding", wire.Request{Op: wire.OpAllocate, Pref: []string{"-dn1"}}, unavailable, false},
		{"allocate no space", wire.Request{Op: wire.OpAllocate}, noSpace, false},
		{"allocate lost", wire.Request{Op: wire.OpAllocate}, ErrConnLost, false},
		{"create file", wire.Request{Op: wire.OpCreate, Type: wire.TypeFile}, unavailable, true},
		{"create file over the limit", wire.Request{Op: wire.OpCreate, Type: wire.TypeFile, Rep: wire.MaxReplica + 1}, unavailable, false},
		{"create dir", wire.Request{Op: wire.OpCreate, Type: wire.TypeDir}, unavailable, false},
		{"set replication", wire.Request{Op: wire.OpSetAttr, Flags: wire.FlagRep, Rep: 2}, unavailable, true},
		{"set mode", wire.Request{Op: wire.OpSetAttr}, unavailable, false},
		{"commit", wire.Request{Op: wire.OpCommit}, unavailable, false},
	}
	for _, c := range cases {
		if got := waitsForDatanodes(&c.q, c.err); got != c.want {
			t.Errorf("%s: waitsForDatanodes = %v, want %v", c.name, got, c.want)
		}
	}
}
