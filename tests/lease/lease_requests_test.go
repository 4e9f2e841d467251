package lease

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"sync"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	nfsc "github.com/willscott/go-nfs-client/nfs"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/auth"
	"github.com/plasmafs/plasma/internal/clientx"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/internal/wire"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestHostileLeaseRequests: lease requests of an ordinary user for what
// she may not read or reach, for files and for missing inodes: refused
// with the error inode-addressed requests give (a file behind a
// directory she cannot search is "permission denied", as for stat, not
// "not a directory", which would tell its type); a directory she may
// write is leased (lease_writers_only_test.go: one she may only read is
// not).
func TestHostileLeaseRequests(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Datanodes: 1})
	ctx := context.Background()
	admin := c.Client(client.Config{})
	defer admin.Close()
	inos := map[string]uint64{}
	testkit.MustOK(t, "setup", admin.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
		mk := func(p string, mode fs.FileMode) error {
			fi, err := tx.Mkdir(ctx, p, mode)
			if err != nil {
				return err
			}
			inos[p] = fi.Ino
			_, err = tx.SetAttr(ctx, fi.Ino, client.SetAttr{Mode: &mode})
			return err
		}
		for _, d := range []struct {
			p string
			m fs.FileMode
		}{{"/pub", 0o777}, {"/secret", 0o700}, {"/secret/sub", 0o777}, {"/searchonly", 0o711}} {
			if err := mk(d.p, d.m); err != nil {
				return err
			}
		}
		for _, f := range []string{"/pub/f", "/secret/f"} {
			fi, err := tx.Create(ctx, f, client.CreateOptions{})
			if err != nil {
				return err
			}
			inos[f] = fi.Ino
		}
		return nil
	}))
	conn := testkit.RawAs(t, c, c.IssueCredential("alice", auth.RoleUser))
	for _, tc := range []struct {
		ino  uint64
		what string
		want wire.Code
	}{
		{inos["/secret"], "a 0700 directory of root's", wire.ErrCodePerm},
		{inos["/secret/sub"], "a directory inside it", wire.ErrCodePerm},
		{inos["/secret/f"], "a file inside it", wire.ErrCodePerm},
		{inos["/searchonly"], "a 0711 directory", wire.ErrCodePerm},
		{inos["/pub/f"], "a file she can reach", wire.ErrCodeNotDir},
		{1 << 50, "a missing inode", wire.ErrCodeNotFound},
		{0, "inode 0", wire.ErrCodeNotFound},
	} {
		r, err := conn.Call(ctx, &wire.Request{Op: wire.OpLeaseDir, Ino: tc.ino})
		testkit.MustOK(t, "lease request", err)
		if r.Code != tc.want {
			t.Errorf("lease of %s (inode %d): code %d %q, want %d", tc.what, tc.ino, r.Code, r.Msg, tc.want)
		}
		if len(r.Paths) != 0 {
			t.Errorf("lease of %s (inode %d) listed %q", tc.what, tc.ino, r.Paths)
		}
	}
	r := testkit.MustCall(t, conn, &wire.Request{Op: wire.OpLeaseDir, Ino: inos["/pub"]})
	if len(r.Counters) < 2 || r.Counters[0] == 0 || r.Counters[1] != 1 || len(r.Paths) != 1 || r.Paths[0] != "f" {
		t.Fatalf("lease of /pub: %+v, want a new lease listing f", r)
	}
	// Directories of 4096 names (leased, every name listed) and of 4097
	// (not leased); long names. Not in /pub: making them there waits for
	// her lease, after which she gets none for a while.
	for _, n := range []int{4096, 4097} {
		var d client.FileInfo
		testkit.MustOK(t, "big directory", admin.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
			var err error
			if d, err = tx.Mkdir(ctx, fmt.Sprintf("/big%d", n), 0o777); err != nil {
				return err
			}
			mode := fs.FileMode(0o777) // only writers get leases
			if _, err := tx.SetAttr(ctx, d.Ino, client.SetAttr{Mode: &mode}); err != nil {
				return err
			}
			for i := 0; i < n; i++ {
				if _, err := clientx.At(tx).CreateAt(ctx, d.Ino, fmt.Sprintf("%0250d", i), client.CreateOptions{}); err != nil {
					return err
				}
			}
			return nil
		}))
		r := testkit.MustCall(t, conn, &wire.Request{Op: wire.OpLeaseDir, Ino: d.Ino})
		switch {
		case n <= 4096 && (r.Counters[0] == 0 || len(r.Paths) != n):
			t.Errorf("directory of %d names: lease %v with %d names, want a lease listing all", n, r.Counters, len(r.Paths))
		case n > 4096 && (r.Counters[0] != 0 || len(r.Paths) != 0):
			t.Errorf("directory of %d names: lease %v with %d names, want none", n, r.Counters, len(r.Paths))
		}
	}
}

// TestHostileLeaseTwoMountsConcurrent: two mounts (no caches) create,
// rename across directories, hard-link and unlink in the same
// directories at once, each looking up missing names there so that both
// keep asking for leases. Every name one mount made (and never removes)
// is found by the other mount as soon as the operation has returned, and
// by the mount itself; the names it renamed away or unlinked are gone.
func TestHostileLeaseTwoMountsConcurrent(t *testing.T) {
	testkit.NeedFUSE(t)
	c := clustertest.Start(t, clustertest.Options{})
	mounts := []*testkit.Mount{testkit.StartMount(t, c, "ttl=0"), testkit.StartMount(t, c, "ttl=0")}
	const ndirs, rounds = 3, 40
	for i := 0; i < ndirs; i++ {
		testkit.MustOK(t, "mkdir", os.Mkdir(mounts[0].Path(fmt.Sprintf("d%d", i)), 0o755))
	}
	// dirfds[m][i]: directory i opened in mount m.
	dirfds := make([][]int, len(mounts))
	for m, mnt := range mounts {
		for i := 0; i < ndirs; i++ {
			fd, err := unix.Open(mnt.Path(fmt.Sprintf("d%d", i)), unix.O_RDONLY|unix.O_DIRECTORY, 0)
			testkit.MustOK(t, "open directory", err)
			t.Cleanup(func() { unix.Close(fd) })
			dirfds[m] = append(dirfds[m], fd)
		}
	}
	type made struct {
		dir  int
		name string
	}
	var (
		mu   sync.Mutex
		errs []string
	)
	report := func(format string, args ...any) {
		mu.Lock()
		errs = append(errs, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	exists := func(m int, x made) bool {
		var st unix.Stat_t
		return unix.Fstatat(dirfds[m][x.dir], x.name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil
	}
	gone := func(m int, x made) bool {
		var st unix.Stat_t
		return errors.Is(unix.Fstatat(dirfds[m][x.dir], x.name, &st, unix.AT_SYMLINK_NOFOLLOW), syscall.ENOENT)
	}
	posted := make([]chan made, len(mounts)) // names the other mount must see
	for m := range posted {
		posted[m] = make(chan made, 4*rounds)
	}
	var wg sync.WaitGroup
	for m := range mounts {
		other := 1 - m
		// The worker.
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(posted[other])
			fds := dirfds[m]
			own := func(x made, what string) {
				if !exists(m, x) {
					report("mount %d: d%d/%s missing in the mount that just made it (%s)", m, x.dir, x.name, what)
				}
				posted[other] <- x
			}
			for i := 0; i < rounds; i++ {
				di, dj := i%ndirs, (i+1)%ndirs
				p := fmt.Sprintf("m%d-%d", m, i)
				for _, miss := range []string{"never1-" + p, "never2-" + p} {
					if x := (made{di, miss}); !gone(m, x) {
						report("mount %d: d%d/%s, never made, is not ENOENT", m, di, miss)
					}
				}
				tmp := made{di, "t" + p}
				f, err := unix.Openat(fds[di], tmp.name, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY, 0o644)
				if err != nil {
					report("mount %d: create d%d/%s: %v", m, di, tmp.name, err)
					return
				}
				unix.Close(f)
				if !exists(m, tmp) {
					report("mount %d: d%d/%s missing right after its create", m, di, tmp.name)
				}
				ren := made{dj, "r" + p}
				if err := unix.Renameat(fds[di], tmp.name, fds[dj], ren.name); err != nil {
					report("mount %d: rename: %v", m, err)
					return
				}
				if !gone(m, tmp) {
					report("mount %d: d%d/%s still there after it was renamed away", m, di, tmp.name)
				}
				own(ren, "rename")
				lnk := made{di, "l" + p}
				if err := unix.Linkat(fds[dj], ren.name, fds[di], lnk.name, 0); err != nil {
					report("mount %d: link: %v", m, err)
					return
				}
				own(lnk, "link")
				dir := made{dj, "D" + p}
				if err := unix.Mkdirat(fds[dj], dir.name, 0o755); err != nil {
					report("mount %d: mkdir: %v", m, err)
					return
				}
				own(dir, "mkdir")
				sym := made{di, "s" + p}
				if err := unix.Symlinkat("target", fds[di], sym.name); err != nil {
					report("mount %d: symlink: %v", m, err)
					return
				}
				own(sym, "symlink")
				if err := unix.Unlinkat(fds[di], lnk.name, 0); err != nil {
					report("mount %d: unlink: %v", m, err)
					return
				}
				if !gone(m, lnk) {
					report("mount %d: d%d/%s still there after its unlink", m, di, lnk.name)
				}
			}
		}()
		// The checker of the other mount's names.
		wg.Add(1)
		go func() {
			defer wg.Done()
			for x := range posted[m] {
				if x.name[0] == 'l' {
					continue // may be unlinked again by now
				}
				if !exists(m, x) {
					report("mount %d: d%d/%s, made by the other mount whose call had returned, not found", m, x.dir, x.name)
				}
			}
		}()
	}
	wg.Wait()
	for _, e := range errs {
		t.Error(e)
	}
}

// TestHostileLeaseAdditionsFromAnotherMount: for each way of adding a
// name (create, mkdir, symlink, mknod, hard link, rename from another
// directory, rename within the directory, rename with a replaced target
// elsewhere), one mount takes the lease on a fresh directory (two lookups
// of missing names) and the other mount adds a name there; once that call
// has returned, the holder finds the name. Both directions at once.
func TestHostileLeaseAdditionsFromAnotherMount(t *testing.T) {
	testkit.NeedFUSE(t)
	c := clustertest.Start(t, clustertest.Options{})
	mounts := []*testkit.Mount{testkit.StartMount(t, c, "ttl=0"), testkit.StartMount(t, c, "ttl=0")}
	ops := []struct {
		name string
		// add makes name in directory fd (src: a directory of the adder's
		// with files it may use).
		add func(src, fd int, name string) error
	}{
		{"create", func(_, fd int, name string) error {
			f, err := unix.Openat(fd, name, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY, 0o644)
			if err == nil {
				unix.Close(f)
			}
			return err
		}},
		{"mkdir", func(_, fd int, name string) error { return unix.Mkdirat(fd, name, 0o755) }},
		{"symlink", func(_, fd int, name string) error { return unix.Symlinkat("x", fd, name) }},
		{"mknod", func(_, fd int, name string) error { return unix.Mknodat(fd, name, unix.S_IFIFO|0o644, 0) }},
		{"link", func(src, fd int, name string) error {
			f, err := unix.Openat(src, name, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY, 0o644)
			if err != nil {
				return err
			}
			unix.Close(f)
			return unix.Linkat(src, name, fd, name, 0)
		}},
		{"rename", func(src, fd int, name string) error {
			if err := unix.Mkdirat(src, name, 0o755); err != nil {
				return err
			}
			return unix.Renameat(src, name, fd, name)
		}},
		{"rename-within", func(_, fd int, name string) error {
			// A name the holder knows, moved to one it does not.
			return unix.Renameat(fd, "old", fd, name)
		}},
	}
	var wg sync.WaitGroup
	for m := range mounts {
		holder, adder := mounts[m], mounts[1-m]
		wg.Add(1)
		go func() {
			defer wg.Done()
			src := fmt.Sprintf("src%d", m)
			if err := os.Mkdir(adder.Path(src), 0o755); err != nil {
				t.Error(err)
				return
			}
			sfd, err := unix.Open(adder.Path(src), unix.O_RDONLY|unix.O_DIRECTORY, 0)
			if err != nil {
				t.Error(err)
				return
			}
			defer unix.Close(sfd)
			for _, op := range ops {
				d := fmt.Sprintf("h%d-%s", m, op.name)
				if err := os.Mkdir(holder.Path(d), 0o755); err != nil {
					t.Error(err)
					return
				}
				if err := os.WriteFile(holder.Path(d+"/old"), nil, 0o644); err != nil {
					t.Error(err)
					return
				}
				hfd, err := unix.Open(holder.Path(d), unix.O_RDONLY|unix.O_DIRECTORY, 0)
				if err != nil {
					t.Error(err)
					return
				}
				afd, err := unix.Open(adder.Path(d), unix.O_RDONLY|unix.O_DIRECTORY, 0)
				if err != nil {
					unix.Close(hfd)
					t.Error(err)
					return
				}
				var st unix.Stat_t
				for _, miss := range []string{"miss1", "miss2", "miss3"} {
					if err := unix.Fstatat(hfd, miss, &st, unix.AT_SYMLINK_NOFOLLOW); !errors.Is(err, syscall.ENOENT) {
						t.Errorf("%s: stat %s/%s: %v, want ENOENT", op.name, d, miss, err)
					}
				}
				name := "added-" + op.name
				if err := op.add(sfd, afd, name); err != nil {
					t.Errorf("%s into %s through the other mount: %v", op.name, d, err)
				} else if err := unix.Fstatat(hfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
					t.Errorf("%s: %s/%s, added by the other mount whose call returned, in the lease holder: %v", op.name, d, name, err)
				}
				unix.Close(hfd)
				unix.Close(afd)
			}
		}()
	}
	wg.Wait()
}

// TestHostileLeaseHolderKilledOrFrozen: a mount holding leases is frozen
// (SIGSTOP: its connection stays open, nothing is answered) or killed
// with SIGKILL; another client's creates in the leased directories
// return all the same, and the frozen mount, once thawed, finds them.
func TestHostileLeaseHolderKilledOrFrozen(t *testing.T) {
	testkit.NeedFUSE(t)
	c := clustertest.Start(t, clustertest.Options{})
	ctx := context.Background()
	cl := c.Client(client.Config{})
	defer cl.Close()
	lease := func(m *testkit.Mount, d string) (int, uint64) {
		t.Helper()
		fd := mkdirAt(t, m, d)
		for _, miss := range []string{"miss1", "miss2", "miss3"} {
			missingAt(t, fd, miss)
		}
		fi, err := clientx.Auto(cl, clientx.Durable).Lstat(ctx, "/"+d)
		testkit.MustOK(t, "lstat", err)
		return fd, fi.Ino
	}
	frozen := testkit.StartMount(t, c, "ttl=0")
	ffd, fino := lease(frozen, "f")
	frozen.Signal(syscall.SIGSTOP)
	_, err := clientx.At(clientx.Auto(cl, clientx.Async)).CreateAt(ctx, fino, "while-frozen", client.CreateOptions{})
	testkit.MustOK(t, "create in a directory leased by a frozen mount", err)
	frozen.Signal(syscall.SIGCONT)
	var st unix.Stat_t
	if err := unix.Fstatat(ffd, "while-frozen", &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		t.Errorf("the thawed mount does not find a name created while it was frozen: %v", err)
	}
	killed := testkit.StartMount(t, c, "ttl=0")
	var inos []uint64
	for i := 0; i < 5; i++ {
		_, ino := lease(killed, fmt.Sprintf("k%d", i))
		inos = append(inos, ino)
	}
	killed.Signal(syscall.SIGKILL)
	killed.Wait()
	for _, ino := range inos {
		_, err := clientx.At(clientx.Auto(cl, clientx.Async)).CreateAt(ctx, ino, "after-kill", client.CreateOptions{})
		testkit.MustOK(t, "create in a directory leased by a killed mount", err)
	}
	other := testkit.StartMount(t, c, "ttl=0")
	for i := range inos {
		if _, err := os.Lstat(other.Path(fmt.Sprintf("k%d/after-kill", i))); err != nil {
			t.Errorf("k%d/after-kill: %v", i, err)
		}
	}
}

// TestHostileLeaseNamenodeRestartRelease: the mount holds a lease; the
// namenode is killed and restarted; the mount at once leases the
// directory again from the new namenode (during its start-up grace),
// another client creates there, and the mount finds the name.
func TestHostileLeaseNamenodeRestartRelease(t *testing.T) {
	testkit.NeedFUSE(t)
	c := clustertest.Start(t, clustertest.Options{})
	m := testkit.StartMount(t, c, "ttl=0")
	ctx := context.Background()
	dfd := mkdirAt(t, m, "d")
	for _, name := range []string{"miss1", "miss2", "miss3"} {
		missingAt(t, dfd, name)
	}
	c.Kill(c.NN)
	c.StartNamenode()
	// The mount reconnects and leases d again at once.
	for _, name := range []string{"miss4", "miss5", "miss6"} {
		missingAt(t, dfd, name)
	}
	cl := c.Client(client.Config{})
	defer cl.Close()
	d, err := clientx.Auto(cl, clientx.Durable).Lstat(ctx, "/d")
	testkit.MustOK(t, "lookup /d", err)
	for i := 0; i < 3; i++ {
		name := fmt.Sprintf("after-restart%d", i)
		_, err = clientx.At(clientx.Auto(cl, clientx.Async)).CreateAt(ctx, d.Ino, name, client.CreateOptions{})
		testkit.MustOK(t, "create after the restart", err)
		var st unix.Stat_t
		if err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			t.Fatalf("%s, created after the namenode restarted, through the mount: %v", name, err)
		}
		missingAt(t, dfd, "miss-again")
	}
}

// TestHostileLeaseNFSAndMount: the NFS bridge and a mount (each over its
// own VFS and namenode connection) in one directory: whichever holds the
// lease (lookups of missing names), a name the other made is found once
// the other's call has returned.
func TestHostileLeaseNFSAndMount(t *testing.T) {
	testkit.NeedFUSE(t)
	c := clustertest.Start(t, clustertest.Options{})
	m := testkit.StartMount(t, c, "ttl=0")
	tg := testkit.DialNFS(t, testkit.StartNFS(t, c).Addr)
	dfd := mkdirAt(t, m, "d")
	nfsMissing := func(name string) {
		t.Helper()
		if _, _, err := tg.Lookup("/d/" + name); !errors.Is(err, os.ErrNotExist) {
			var ne *nfsc.Error
			if !errors.As(err, &ne) || ne.ErrorNum != nfsc.NFS3ErrNoEnt {
				t.Fatalf("NFS lookup /d/%s: %v, want no such file", name, err)
			}
		}
	}
	for i := 0; i < 8; i++ {
		// The mount holds the lease; NFS adds.
		for _, miss := range []string{"m1", "m2", "m3"} {
			missingAt(t, dfd, fmt.Sprintf("%s-%d", miss, i))
		}
		name := fmt.Sprintf("nfs%d", i)
		if i%2 == 0 {
			_, err := tg.Create("/d/"+name, 0o644)
			testkit.MustOK(t, "NFS create", err)
		} else {
			_, err := tg.Mkdir("/d/"+name, 0o755)
			testkit.MustOK(t, "NFS mkdir", err)
		}
		var st unix.Stat_t
		if err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			t.Fatalf("d/%s made over NFS, through the mount: %v", name, err)
		}
		// The bridge holds the lease; the mount adds.
		for _, miss := range []string{"n1", "n2", "n3"} {
			nfsMissing(fmt.Sprintf("%s-%d", miss, i))
		}
		name = fmt.Sprintf("fuse%d", i)
		f, err := unix.Openat(dfd, name, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY, 0o644)
		testkit.MustOK(t, "create through the mount", err)
		unix.Close(f)
		if _, _, err := tg.Lookup("/d/" + name); err != nil {
			t.Fatalf("d/%s made through the mount, over NFS: %v", name, err)
		}
	}
}

// TestHostileLeaseFloods: a user's connection leases thousands of
// directories and keeps renewing them; another client's creates in them
// all return (each waits out at most the lease) and the namenode answers
// others meanwhile. A connection flooding creates into a leased directory
// gets every request answered: those over the limit of waiting requests
// at once with a conflict, the rest once the lease has ended; each
// create answered OK made its name, no other did.
func TestHostileLeaseFloods(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Datanodes: 1})
	ctx := context.Background()
	admin := c.Client(client.Config{})
	defer admin.Close()
	const ndirs = 3000
	var dirs []uint64
	testkit.MustOK(t, "setup", admin.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
		p, err := tx.Mkdir(ctx, "/pub", 0o755)
		if err != nil {
			return err
		}
		for i := 0; i < ndirs; i++ {
			fi, err := clientx.At(tx).MkdirAt(ctx, p.Ino, fmt.Sprint(i), 0o777)
			if err != nil {
				return err
			}
			dirs = append(dirs, fi.Ino)
		}
		return nil
	}))
	hostile := testkit.RawAs(t, c, c.IssueCredential("mallory", auth.RoleUser))
	leaseAll := func() int {
		granted := 0
		for _, d := range dirs {
			r := testkit.MustCall(t, hostile, &wire.Request{Op: wire.OpLeaseDir, Ino: d})
			if r.Counters[0] != 0 {
				granted++
			}
		}
		return granted
	}
	if n := leaseAll(); n != ndirs {
		t.Fatalf("%d of %d directories leased", n, ndirs)
	}
	stop := make(chan struct{})
	renewer := make(chan struct{})
	go func() {
		defer close(renewer)
		for {
			select {
			case <-stop:
				return
			default:
			}
			leaseAll()
		}
	}()
	var wg sync.WaitGroup
	for i := 0; i < 40; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := clientx.At(clientx.Auto(admin, clientx.Async)).CreateAt(ctx, dirs[i*(ndirs/40)], "mine", client.CreateOptions{}); err != nil {
				t.Errorf("create in a directory the hostile client leases: %v", err)
			}
		}()
	}
	wg.Wait()
	if _, err := clientx.NamenodeStats(ctx, admin); err != nil {
		t.Fatal(err)
	}
	close(stop)
	<-renewer

	// The flood: more creates into one leased directory than may wait.
	// The lease is another user's: mallory, who made others wait, gets
	// none for a while.
	target := dirs[ndirs-1]
	if r := testkit.MustCall(t, testkit.RawAs(t, c, c.IssueCredential("trudy", auth.RoleUser)), &wire.Request{Op: wire.OpLeaseDir, Ino: target}); r.Counters[0] == 0 {
		t.Fatal("no lease on the flood's directory")
	}
	flooder := testkit.RawAs(t, c, c.AdminCred)
	const nflood = 400
	codes := make([]wire.Code, nflood)
	for i := 0; i < nflood; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := flooder.Call(ctx, &wire.Request{Op: wire.OpCreate, Ino: target, Path: fmt.Sprintf("f%d", i),
				Type: wire.TypeFile, Mode: 0o644, Txn: uint64(1000 + i), Flags: wire.FlagAt | wire.FlagBegin | wire.FlagCommit})
			if err != nil {
				t.Errorf("flood create %d: %v", i, err)
				return
			}
			codes[i] = r.Code
		}()
	}
	wg.Wait()
	ok := 0
	for i, code := range codes {
		_, err := clientx.At(clientx.Auto(admin, clientx.Durable)).LookupAt(ctx, target, fmt.Sprintf("f%d", i))
		switch {
		case code == wire.OK:
			ok++
			testkit.MustOK(t, "lookup of a name whose create was answered OK", err)
		case code == wire.ErrCodeConflict:
			if !errors.Is(err, client.ErrNotFound) {
				t.Errorf("f%d: create refused, lookup: %v", i, err)
			}
		default:
			t.Errorf("flood create f%d: code %d", i, code)
		}
	}
	if ok == 0 {
		t.Error("no create of the flood succeeded")
	}
}

// cutProxy forwards TCP connections to a namenode; cut closes their
// namenode side while leaving the client side open and silent, as a
// connection the network broke, that the client has not noticed yet.
type cutProxy struct {
	ln    net.Listener
	mu    sync.Mutex
	ups   []net.Conn
	downs []net.Conn
}

func startCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	testkit.MustOK(t, "listen", err)
	p := &cutProxy{ln: ln}
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, c := range append(p.ups, p.downs...) {
			c.Close()
		}
	})
	go func() {
		for {
			down, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				down.Close()
				continue
			}
			p.mu.Lock()
			p.ups, p.downs = append(p.ups, up), append(p.downs, down)
			p.mu.Unlock()
			go io.Copy(up, down)
			go io.Copy(down, up)
		}
	}()
	return p
}

func (p *cutProxy) Addr() string { return p.ln.Addr().String() }

// cut closes the namenode side of every connection so far.
func (p *cutProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.ups {
		c.Close()
	}
	p.ups = nil
}

// TestHostileLeaseConnectionBroken: the namenode loses the lease
// holder's connection (a reset on the way, say) while the holder has not
// noticed: the holder still counts on its lease, so another client's
// create in the directory must not be answered before that lease has run
// out at the holder.
func TestHostileLeaseConnectionBroken(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Datanodes: 1})
	ctx := context.Background()
	other := c.Client(client.Config{})
	defer other.Close()
	for i := 0; i < 5; i++ {
		proxy := startCutProxy(t, c.NN.Addr)
		holder := c.Client(client.Config{Namenodes: []string{proxy.Addr()}, KeepaliveInterval: -1})
		d, err := clientx.Auto(other, clientx.Durable).Mkdir(ctx, fmt.Sprintf("/d%d", i), 0o755)
		testkit.MustOK(t, "mkdir", err)
		l, ok, err := clientx.LeaseDir(ctx, holder, d.Ino)
		if err != nil || !ok {
			t.Fatalf("lease: ok=%v err=%v", ok, err)
		}
		proxy.cut()
		_, err = clientx.At(clientx.Auto(other, clientx.Async)).CreateAt(ctx, d.Ino, "x", client.CreateOptions{})
		testkit.MustOK(t, "create", err)
		if clientx.LeaseValid(holder, l) {
			t.Fatalf("another client's create in a directory leased on a connection the namenode lost returned while the holder's lease (until %v) still ran", l.Expires)
		}
		holder.Close()
	}
}
