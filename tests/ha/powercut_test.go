package ha

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/plasmafs/plasma/internal/lossyfs"
	"github.com/plasmafs/plasma/tests/testkit"
)

// memberDisk is a member's power-cut filesystem (internal/lossyfs): its
// database and Raft state (the database's .group directory) are on it,
// and a power cut loses whatever the member did not fsync.
type memberDisk struct {
	disk, mnt string
	fs        *lossyfs.FS
}

// mountDisk mounts member i's disk and returns the path of its database
// there.
func (g *group) mountDisk(i int) string {
	g.t.Helper()
	if os.Geteuid() != 0 {
		g.t.Skip("power-cut tests need root (a FUSE mount); CI runs as root")
	}
	d := &memberDisk{disk: filepath.Join(g.dir, fmt.Sprintf("disk%d", i)), mnt: filepath.Join(g.dir, fmt.Sprintf("mnt%d", i))}
	for _, p := range []string{d.disk, d.mnt} {
		if err := os.Mkdir(p, 0o755); err != nil {
			g.t.Fatal(err)
		}
	}
	fs, err := lossyfs.Mount(d.disk, d.mnt)
	if err != nil {
		g.t.Fatal(err)
	}
	d.fs = fs
	// Cleanups run last first: registered before the group's, this
	// unmounts after the members have stopped.
	g.t.Cleanup(func() {
		if err := d.fs.Unmount(); err != nil {
			g.t.Errorf("unmount %s: %v", d.mnt, err)
		}
	})
	if g.disks == nil {
		g.disks = map[string]*memberDisk{}
	}
	g.disks[strconv.Itoa(i)] = d
	return filepath.Join(d.mnt, "nn.db")
}

// syncDisks makes the members' databases, as copied, durable (as an
// operator's sync(1) after copying them).
func (g *group) syncDisks() {
	g.t.Helper()
	for _, d := range g.disks {
		if err := d.fs.Sync(); err != nil {
			g.t.Fatal(err)
		}
	}
}

// powerCut kills member m and cuts its disk's power: what it did not
// fsync is lost. The member is not restarted.
func (g *group) powerCut(m *member) {
	g.t.Helper()
	if m.running() {
		g.kill(m)
	}
	d := g.disks[m.id]
	if err := d.fs.Cut(); err != nil {
		g.t.Fatalf("power cut of member %s: %v", m.id, err)
	}
	fs, err := lossyfs.Mount(d.disk, d.mnt)
	if err != nil {
		g.t.Fatalf("mount member %s's disk after the power cut: %v", m.id, err)
	}
	d.fs = fs
}

// freeze stops member m's process (SIGSTOP): a member that lags, as on
// a stalled machine; thaw lets it go on.
func (g *group) freeze(m *member) { m.cmd.Process.Signal(syscall.SIGSTOP) }
func (g *group) thaw(m *member)   { m.cmd.Process.Signal(syscall.SIGCONT) }

// checkAllAcked checks that the leader serves every acknowledged name,
// that fsck is clean, and that every member's own database holds them
// once caught up (the members are stopped).
func (g *group) checkAllAcked(acked []string) {
	g.t.Helper()
	ctx := context.Background()
	cl := g.client()
	defer cl.Close()
	tx := cl.Begin()
	ents, err := tx.ReadDir(ctx, "/")
	if err != nil {
		g.t.Fatal(err)
	}
	tx.Abort(ctx)
	have := map[string]bool{}
	for _, e := range ents {
		have[e.Name] = true
	}
	if n := missing(acked, have); n > 0 {
		g.t.Fatalf("the leader lacks %d of %d acknowledged commits", n, len(acked))
	}
	testkit.FsckClean(g.t, cl)
	g.waitCaughtUp()
	g.stopMembers()
	for _, m := range g.members {
		if n := missing(acked, rootNames(g.t, m)); n > 0 {
			g.t.Errorf("member %s's database lacks %d of %d acknowledged commits", m.id, n, len(acked))
		}
	}
}

// others is every member but m.
func (g *group) others(m *member) []*member {
	var out []*member
	for _, o := range g.members {
		if o != m {
			out = append(out, o)
		}
	}
	return out
}

// Issue 22: a power cut of a follower during commits. One follower lags
// (frozen), so the commits acknowledged meanwhile are durable on the
// leader and the other follower only; that follower's power is cut, then
// the leader crashes (kill -9) before it could pass the commits on. The
// cut follower comes back and, with the lagging one, elects a leader: it
// must be the one that kept the commits in its durable log. Once the old
// leader is back too, every acknowledged commit is on the leader and in
// every member's database, and fsck is clean. Fails without the fdatasync
// of the members' Raft logs: the cut follower comes back without the
// commits and the lagging one is elected without them.
func TestPowerCutOfFollowerKeepsAcknowledgedCommits(t *testing.T) {
	g := startGroupWith(t, 3, 1, groupOptions{PowerCut: true})
	l := g.leader()
	rest := g.others(l)
	cut, lag := rest[0], rest[1]
	w := startWriters(g, 4, "w")
	w.waitAcked(t, 100)
	g.freeze(lag)
	w.waitAcked(t, w.count()+200) // durable on the leader and the follower to cut only
	g.powerCut(cut)
	g.kill(l)
	g.startMember(cut, g.peers())
	g.thaw(lag)
	nl := g.leaderAmong(cut, lag)
	w.waitAcked(t, w.count()+50) // the writers go on with the new leader
	acked := w.finish()
	t.Logf("%d commits acknowledged (%d of unknown outcome); member %s leads after the cut of %s and the crash of %s",
		len(acked), w.unknown, nl.id, cut.id, l.id)
	g.startMember(l, g.peers())
	g.checkAllAcked(acked)
}

// Issue 22: a power cut of the leader during commits. One follower lags
// (frozen) while the others acknowledge commits; the leader's power is
// cut, and the up-to-date follower stalls (frozen) while the leader comes
// back and the lagging follower goes on: those two elect a leader, which
// must be the one with the commits in its durable log. Then every member
// runs, and every acknowledged commit is on the leader and in every
// member's database, and fsck is clean. Fails without the fdatasync of
// the members' Raft logs: the leader comes back without the commits and
// votes for the lagging follower.
func TestPowerCutOfLeaderKeepsAcknowledgedCommits(t *testing.T) {
	g := startGroupWith(t, 3, 1, groupOptions{PowerCut: true})
	l := g.leader()
	rest := g.others(l)
	upToDate, lag := rest[0], rest[1]
	w := startWriters(g, 4, "w")
	w.waitAcked(t, 100)
	g.freeze(lag)
	w.waitAcked(t, w.count()+200)
	g.powerCut(l)
	g.freeze(upToDate)
	g.startMember(l, g.peers())
	g.thaw(lag)
	nl := g.leaderAmong(l, lag)
	g.thaw(upToDate)
	w.waitAcked(t, w.count()+50) // the writers go on with the new leader
	acked := w.finish()
	t.Logf("%d commits acknowledged (%d of unknown outcome); member %s leads after the cut of %s", len(acked), w.unknown, nl.id, l.id)
	g.checkAllAcked(acked)
}
