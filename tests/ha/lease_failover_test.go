package ha

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/plasmafs/plasma/internal/clientx"
	"github.com/plasmafs/plasma/tests/testkit"
)

// Issue 22 item 4: a directory lease a former leader granted is safe
// across a change of leader. A mount (ttl=0: every lookup reaches its
// lease) holds the lease on a directory, answering lookups of missing
// names there itself. The leader then stalls (frozen, as a paused
// machine): its connections stay open, so the mount, which counts its
// lease against its connection, has no reason to doubt it; the others
// elect a new leader. The new leader knows nothing of the lease, so it
// makes another client's addition to the directory wait until any lease
// its predecessor granted has ended (its start-up grace, one lease term;
// 20 s here, longer than the failover). Right after the addition, the
// mount's lease has ended and its lookup of the new name goes to the
// namenode (the frozen one, until it is killed; then the new leader):
// the name is found. Fails without the grace at takeover: the addition is
// admitted at once, and the mount answers "no such file" from the old
// leader's lease.
func TestMountDirLeaseAcrossFailover(t *testing.T) {
	testkit.NeedFUSE(t)
	g := startGroupWith(t, 3, 1, groupOptions{MemberArgs: []string{"-lease-term", "20s"}})
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PLASMAFS_") {
			env = append(env, kv)
		}
	}
	env = append(env, "PLASMAFS_NAMENODES="+strings.Join(g.addrs(), ","), "PLASMAFS_CONFIG="+filepath.Join(g.dir, "no-config"),
		"PLASMAFS_SECURITY=none", "PLASMAFS_DATA_SECURITY=none")
	m := testkit.StartMountWith(t, g.bin, env, "ttl=0")
	if err := os.Mkdir(m.Path("d"), 0o755); err != nil {
		t.Fatal(err)
	}
	dfd, err := unix.Open(m.Path("d"), unix.O_RDONLY|unix.O_DIRECTORY, 0)
	testkit.MustOK(t, "open d", err)
	defer unix.Close(dfd)
	var st unix.Stat_t
	// Misses make the mount ask for the lease.
	for _, name := range []string{"probe1", "probe2", "probe3"} {
		if err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); !errors.Is(err, syscall.ENOENT) {
			t.Fatalf("stat d/%s: %v, want ENOENT", name, err)
		}
	}
	old := g.leader()
	g.freeze(old)
	nl := g.leaderAmong(g.others(old)...)

	// A client of the new leader alone (one with the list would wait
	// for the frozen member's answer first).
	cl := g.clientOf(nl.addr)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	d, err := clientx.Auto(cl, clientx.Durable).Lstat(ctx, "/d")
	testkit.MustOK(t, "lookup /d on the new leader", err)
	_, err = clientx.At(clientx.Auto(cl, clientx.Durable)).MkdirAt(ctx, d.Ino, "after-failover", 0o755)
	testkit.MustOK(t, "add a name on the new leader", err)
	found := make(chan error, 1)
	go func() {
		var st unix.Stat_t
		found <- unix.Fstatat(dfd, "after-failover", &st, unix.AT_SYMLINK_NOFOLLOW)
	}()
	// The lookup reaches the frozen old leader and waits for it: after a
	// while it is killed, and the mount asks the new one. (Not a
	// synchronisation: an answer from the mount's lease comes at once,
	// one from a namenode only after the kill; either is checked.)
	var ferr error
	select {
	case ferr = <-found:
	case <-time.After(5 * time.Second):
		g.kill(old)
		ferr = <-found
	}
	if ferr != nil {
		t.Fatalf("a name added on the new leader, through the mount that leased the directory from the old one: %v", ferr)
	}
}
