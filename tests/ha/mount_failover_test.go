package ha

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/plasmafs/plasma/tests/testkit"
)

// Issue 22: a FUSE mount given the namenode list rides through a failover:
// after the leader's kill -9, files written before read back and a new
// file is written and read back through the mount without an error.
func TestMountRidesThroughFailover(t *testing.T) {
	g := startGroup(t, 3, 1)
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PLASMAFS_") {
			env = append(env, kv)
		}
	}
	env = append(env, "PLASMAFS_NAMENODES="+strings.Join(g.addrs(), ","), "PLASMAFS_CONFIG="+filepath.Join(g.dir, "no-config"),
		"PLASMAFS_SECURITY=none", "PLASMAFS_DATA_SECURITY=none")
	m := testkit.StartMountWith(t, g.bin, env)
	before := testkit.SeededBytes(200_000, 1)
	if err := os.WriteFile(m.Path("before"), before, 0o644); err != nil {
		t.Fatal(err)
	}
	g.kill(g.leader())
	if got, err := os.ReadFile(m.Path("before")); err != nil || !bytes.Equal(got, before) {
		t.Fatalf("read through the mount after the failover: %d bytes, %v", len(got), err)
	}
	after := testkit.SeededBytes(200_000, 2)
	if err := os.WriteFile(m.Path("after"), after, 0o644); err != nil {
		t.Fatalf("write through the mount after the failover: %v", err)
	}
	if got, err := os.ReadFile(m.Path("after")); err != nil || !bytes.Equal(got, after) {
		t.Fatalf("read back through the mount: %d bytes, %v", len(got), err)
	}
}
