package lease

import (
	"context"
	"fmt"
	"io/fs"
	"sync"
	"testing"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/auth"
	"github.com/plasmafs/plasma/internal/clientx"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/internal/rpc"
	"github.com/plasmafs/plasma/internal/wire"
	"github.com/plasmafs/plasma/tests/testkit"
)

// mkdirsMode makes directories (path → mode, owned by the caller, in
// group if set) in one transaction and returns their inodes.
func mkdirsMode(t *testing.T, c *client.Client, group string, dirs map[string]fs.FileMode, order ...string) map[string]uint64 {
	t.Helper()
	inos := map[string]uint64{}
	testkit.MustOK(t, "mkdir", c.Txn(context.Background(), func(ctx context.Context, tx *client.Txn) error {
		for _, p := range order {
			fi, err := tx.Mkdir(ctx, p, 0o700)
			if err != nil {
				return err
			}
			mode := dirs[p]
			set := client.SetAttr{Mode: &mode}
			if group != "" {
				set.Group = &group
			}
			if _, err := tx.SetAttr(ctx, fi.Ino, set); err != nil {
				return err
			}
			inos[p] = fi.Ino
		}
		return nil
	}))
	return inos
}

// leaseOf asks for (or renews) a lease on dir over conn; the answer's
// term is 0 when none is given.
func leaseOf(t *testing.T, conn *rpc.Conn, dir uint64) (term time.Duration, names []string) {
	t.Helper()
	r := testkit.MustCall(t, conn, &wire.Request{Op: wire.OpLeaseDir, Ino: dir})
	if len(r.Counters) < 2 {
		t.Fatalf("lease of inode %d: short answer %v", dir, r.Counters)
	}
	return time.Duration(r.Counters[0]), r.Paths
}

func leaseWaits(t *testing.T, c *client.Client) uint64 {
	t.Helper()
	s, err := clientx.NamenodeStats(context.Background(), c)
	testkit.MustOK(t, "namenode stats", err)
	return s.LeaseWaits
}

// TestLeaseOnlyForWriters: a directory lease holds up others' creates in
// the directory, so only a user who may add names there herself (write
// and search permission) gets one. With leases of a minute: a user who
// may only read a directory is given no lease (the request is answered,
// without one), and the owner's create there is answered at once,
// without waiting (the namenode counts no wait), where it would have
// waited out her minute. A user who may write there through her group is
// leased the directory; once the mode no longer lets her write, her
// lease is not renewed.
func TestLeaseOnlyForWriters(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Datanodes: 1, NamenodeArgs: []string{"-lease-term", "1m"}})
	ctx := context.Background()
	admin := c.Client(client.Config{})
	defer admin.Close()
	inos := mkdirsMode(t, admin, "staff", map[string]fs.FileMode{"/ro": 0o755, "/grp": 0o775},
		"/ro", "/grp")
	reader := testkit.RawAs(t, c, c.IssueCredential("alice", auth.RoleUser))
	member := testkit.RawAs(t, c, c.IssueCredential("bob", auth.RoleUser, "staff"))

	// The reader asks for the lease the way a mount does after two
	// lookups of missing names.
	if term, names := leaseOf(t, reader, inos["/ro"]); term != 0 || len(names) != 0 {
		t.Errorf("a user who may only read /ro (0755, root's) was leased it for %v (listing %q)", term, names)
	}
	// Members of staff may read /ro too; not theirs to lease either.
	if term, _ := leaseOf(t, member, inos["/ro"]); term != 0 {
		t.Errorf("a user who may only read /ro was leased it for %v", term)
	}
	before := leaseWaits(t, admin)
	// Far less than the minute the reader's lease would run: on a
	// namenode that leased /ro to her the create waits for it.
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	_, err := clientx.At(clientx.Auto(admin, clientx.Async)).CreateAt(cctx, inos["/ro"], "mine", client.CreateOptions{})
	cancel()
	testkit.MustOK(t, "the owner's create in /ro, which a reader asked to lease", err)
	if after := leaseWaits(t, admin); after != before {
		t.Errorf("the owner's create in /ro waited for a lease (%d waits counted, want none)", after-before)
	}

	// A writer (through her group) is leased the directory; when the
	// mode stops her writing, her renewal is refused.
	if term, _ := leaseOf(t, member, inos["/grp"]); term != time.Minute {
		t.Fatalf("a member of staff asking for /grp (0775, group staff): lease of %v, want one of a minute", term)
	}
	if term, _ := leaseOf(t, member, inos["/grp"]); term != time.Minute {
		t.Fatalf("renewal for a member of staff: lease of %v, want one of a minute", term)
	}
	mode := fs.FileMode(0o755)
	_, err = clientx.Auto(admin, clientx.Async).SetAttr(ctx, inos["/grp"], client.SetAttr{Mode: &mode})
	testkit.MustOK(t, "chmod /grp", err)
	if term, _ := leaseOf(t, member, inos["/grp"]); term != 0 {
		t.Errorf("the lease on /grp renewed for %v after its mode stopped the holder writing there", term)
	}
}

// TestLeaseOneWaitPerAddition: a lease holder cannot make another
// client's addition wait more than one lease term (five seconds here).
// A hostile user leases forty directories and renews them all the time:
// another client's create in each waits once (the namenode counts one
// wait per create), and the hostile user gets none of the directories
// back at once. Then the namenode restarts and, during its start-up
// grace (one term, for its predecessor's leases), the hostile user
// leases a directory again; a create arriving there during the grace
// must wait for the grace and that lease together, once: the hostile
// user's renewal after the create arrived is refused, and the create
// is counted as waiting once.
func TestLeaseOneWaitPerAddition(t *testing.T) {
	const term = 5 * time.Second
	c := clustertest.Start(t, clustertest.Options{Datanodes: 1, NamenodeArgs: []string{"-lease-term", term.String()}})
	ctx := context.Background()
	admin := c.Client(client.Config{})
	defer admin.Close()
	const ndirs = 40
	modes := map[string]fs.FileMode{"/pub": 0o755}
	order := []string{"/pub"}
	for i := 0; i < ndirs; i++ {
		p := fmt.Sprintf("/pub/%d", i)
		modes[p] = 0o777
		order = append(order, p)
	}
	inos := mkdirsMode(t, admin, "", modes, order...)
	hostile := testkit.RawAs(t, c, c.IssueCredential("mallory", auth.RoleUser))
	for _, p := range order[1:] {
		if term, _ := leaseOf(t, hostile, inos[p]); term == 0 {
			t.Fatalf("no lease on %s", p)
		}
	}
	stop := make(chan struct{})
	renewer := make(chan struct{})
	go func() {
		defer close(renewer)
		for {
			for _, p := range order[1:] {
				select {
				case <-stop:
					return
				default:
				}
				hostile.Call(ctx, &wire.Request{Op: wire.OpLeaseDir, Ino: inos[p]})
			}
		}
	}()
	before := leaseWaits(t, admin)
	var wg sync.WaitGroup
	for _, p := range order[1:] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := clientx.At(clientx.Auto(admin, clientx.Async)).CreateAt(ctx, inos[p], "mine", client.CreateOptions{})
			if err != nil {
				t.Errorf("create in %s, which a hostile user keeps leased: %v", p, err)
			}
		}()
	}
	wg.Wait()
	close(stop)
	<-renewer
	if waits := leaseWaits(t, admin) - before; waits > ndirs {
		t.Errorf("%d creates in leased directories waited %d times, want once each at most", ndirs, waits)
	}
	for _, p := range order[1:] {
		if term, _ := leaseOf(t, hostile, inos[p]); term != 0 {
			t.Errorf("%s leased again for %v right after another client waited for it", p, term)
		}
	}

	// The start-up grace and a lease granted during it.
	d := inos["/pub/0"]
	c.Kill(c.NN)
	c.StartNamenode()
	hostile = testkit.RawAs(t, c, c.IssueCredential("mallory", auth.RoleUser))
	if term, _ := leaseOf(t, hostile, d); term == 0 {
		t.Fatal("no lease on /pub/0 from the restarted namenode")
	}
	before = leaseWaits(t, admin)
	created := make(chan error, 1)
	go func() {
		_, err := clientx.At(clientx.Auto(admin, clientx.Async)).CreateAt(ctx, d, "after-restart", client.CreateOptions{})
		created <- err
	}()
	// Until the namenode has put the create off (it waits for the grace
	// or the lease, or both), or the create has been answered.
	var done bool
	for !done && leaseWaits(t, admin) == before {
		select {
		case err := <-created:
			testkit.MustOK(t, "create after the restart", err)
			done = true
		case <-time.After(10 * time.Millisecond):
		}
	}
	if done {
		t.Fatal("the create after the restart was not put off: neither the grace nor the lease ran when it arrived")
	}
	if term, _ := leaseOf(t, hostile, d); term != 0 {
		t.Errorf("lease on /pub/0 renewed for %v while another client's create waited for it", term)
	}
	testkit.MustOK(t, "create after the restart", <-created)
	if waits := leaseWaits(t, admin) - before; waits != 1 {
		t.Errorf("the create after the restart waited %d times, want once (for the grace and the lease together)", waits)
	}
}

// TestLeaseHolderOfManyDirectories: a hostile user who may write forty
// directories leases them all, on two connections, and keeps renewing.
// Once another client's create has waited for one of those leases, the
// hostile user gets no lease and no renewal anywhere, on either
// connection, not even on a directory she never leased: her leases all
// run out within the term the create waited, so the next creates in her
// other directories wait out no more than that same term, instead of one
// term each. Another user is not cooled off with her.
func TestLeaseHolderOfManyDirectories(t *testing.T) {
	const term = 3 * time.Second // cool-off: 30 s
	c := clustertest.Start(t, clustertest.Options{Datanodes: 1, NamenodeArgs: []string{"-lease-term", term.String()}})
	ctx := context.Background()
	admin := c.Client(client.Config{})
	defer admin.Close()
	const ndirs = 40
	modes := map[string]fs.FileMode{"/pub": 0o755, "/pub/never-leased": 0o777}
	order := []string{"/pub", "/pub/never-leased"}
	for i := 0; i < ndirs; i++ {
		p := fmt.Sprintf("/pub/%d", i)
		modes[p] = 0o777
		order = append(order, p)
	}
	inos := mkdirsMode(t, admin, "", modes, order...)
	leased := order[2:]
	cred := c.IssueCredential("mallory", auth.RoleUser)
	hostile := []*rpc.Conn{testkit.RawAs(t, c, cred), testkit.RawAs(t, c, cred)}
	for i, p := range leased {
		if term, _ := leaseOf(t, hostile[i%2], inos[p]); term == 0 {
			t.Fatalf("no lease on %s", p)
		}
	}
	stop := make(chan struct{})
	renewer := make(chan struct{})
	go func() {
		defer close(renewer)
		for {
			for i, p := range leased {
				select {
				case <-stop:
					return
				default:
				}
				hostile[i%2].Call(ctx, &wire.Request{Op: wire.OpLeaseDir, Ino: inos[p]})
			}
		}
	}()
	// Creates until one has waited (a lease may lapse if the renewer is
	// starved of CPU for a term).
	before := leaseWaits(t, admin)
	waited := false
	for _, p := range leased {
		_, err := clientx.At(clientx.Auto(admin, clientx.Async)).CreateAt(ctx, inos[p], "first", client.CreateOptions{})
		testkit.MustOK(t, "create in a leased directory", err)
		if waited = leaseWaits(t, admin) != before; waited {
			break
		}
	}
	close(stop)
	<-renewer
	if !waited {
		t.Fatal("no create in the directories the hostile user keeps leased waited")
	}
	// Each directory asked for on the connection that held it.
	for i, p := range leased {
		if term, _ := leaseOf(t, hostile[i%2], inos[p]); term != 0 {
			t.Errorf("%s: the hostile user's lease renewed for %v after another client waited for one of her leases", p, term)
		}
	}
	for _, h := range hostile {
		if term, _ := leaseOf(t, h, inos["/pub/never-leased"]); term != 0 {
			t.Errorf("/pub/never-leased leased to the hostile user for %v after another client waited for one of her leases", term)
		}
	}
	other := testkit.RawAs(t, c, c.IssueCredential("bob", auth.RoleUser))
	if term, _ := leaseOf(t, other, inos["/pub/never-leased"]); term == 0 {
		t.Error("another user got no lease while the hostile user cools off")
	}
	for _, p := range leased {
		_, err := clientx.At(clientx.Auto(admin, clientx.Async)).CreateAt(ctx, inos[p], "second", client.CreateOptions{})
		testkit.MustOK(t, "create in "+p, err)
	}
}
