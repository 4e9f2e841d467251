package posix

import (
	"strings"
	"testing"

	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestNFSClaimingNobodyOwnsNoGhosts: the bridge shows owners and groups
// without a local id as 65534 (nobody/nogroup). A client that claims
// uid 65534, or gid 65534, or whose gid 0 is squashed to the anonymous
// group 65534, must not get the owner's or the group's rights on every
// such file (here ghost:ghost's 0600 and 0640 files): it is served as the
// anonymous identity, which owns what is nobody's by name only. An
// ordinary claimed uid still gets its own file (daemon, uid 1).
func TestNFSClaimingNobodyOwnsNoGhosts(t *testing.T) {
	needLibnfs(t)
	c := clustertest.Start(t, clustertest.Options{})
	testkit.PutOwned(t, c, "/ghost-own", "ghost's own\n", "ghost:ghost", "600")
	testkit.PutOwned(t, c, "/ghost-group", "ghost's group's\n", "ghost:ghost", "640")
	testkit.PutOwned(t, c, "/daemon-own", "daemon's own\n", "daemon:daemon", "600")
	c.MustRun("chmod", "777", "/") // libnfs's URLs reach files at the root of the export only
	b := testkit.StartNFSArgs(t, c, "-listen", "127.0.0.1:0")

	if out, err := nfsCat(b, "/daemon-own", 1, 1); err != nil || out != "daemon's own\n" {
		t.Fatalf("uid 1 (daemon) reading its own 0600 file: %v\n%s", err, out)
	}
	for _, tc := range []struct {
		what     string
		path     string
		uid, gid int
	}{
		{"uid 65534 reading the 0600 file of an owner without a local id", "/ghost-own", 65534, 65534},
		{"gid 65534 reading the 0640 file of a group without a local id", "/ghost-group", 4242, 65534},
		{"gid 0 (squashed) reading the 0640 file of a group without a local id", "/ghost-group", 4242, 0},
	} {
		// (nfs-cat says only that the read failed.)
		if out, err := nfsCat(b, tc.path, tc.uid, tc.gid); err == nil || strings.Contains(out, "ghost's") {
			t.Errorf("%s succeeded:\n%s", tc.what, out)
		}
	}
}
