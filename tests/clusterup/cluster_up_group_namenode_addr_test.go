package clusterup

import (
	"strings"
	"testing"

	"github.com/plasmafs/plasma/internal/loopback"
)

// TestClusterUpGroupNamenodeAddr: with -namenodes 3, -namenode-addr is
// the first member's address (it used to be ignored silently: every
// member got a free port); a group formed already refuses another one
// (exit 2, naming the members' addresses) instead of ignoring it.
func TestClusterUpGroupNamenodeAddr(t *testing.T) {
	addr, err := loopback.FreePair()
	if err != nil {
		t.Fatal(err)
	}
	lc := newLocalCluster(t)
	lc.mustRun(lc.upArgs("-detach", "-namenodes", "3", "-datanodes", "1", "-taskserver-slots", "0", "-namenode-addr", addr)...)
	rows := lc.namenodes()
	if len(rows) != 3 || rows[0].Addr != addr {
		t.Fatalf("admin namenodes after cluster up -namenodes 3 -namenode-addr %s: %+v, want %s first", addr, rows, addr)
	}
	lc.mustRun("cluster", "down", "-dir", lc.dir)

	other, err := loopback.FreePair()
	if err != nil {
		t.Fatal(err)
	}
	out, code := lc.run(lc.upArgs("-detach", "-namenode-addr", other)...)
	if code != 2 || !strings.Contains(out, "-namenode-addr "+other) || !strings.Contains(out, addr) {
		t.Fatalf("cluster up -namenode-addr %s of a group formed at %s: exit %d:\n%s\nwant exit 2 naming both", other, addr, code, out)
	}
	// The recorded address given again is no change.
	lc.mustRun(lc.upArgs("-detach", "-namenode-addr", addr)...)
}
