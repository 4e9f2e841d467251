package lease

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clientx"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestMountDirLease: once the mount holds a lease on a directory, the
// lookup of a missing name there (the one the kernel sends before each
// create) is answered without the namenode; a name another client
// creates in that directory is seen by the mount at once all the same
// (the other client's create waits until the lease has ended), and so is
// every name the mount created itself.
func TestMountDirLease(t *testing.T) {
	testkit.NeedFUSE(t)
	c := clustertest.Start(t, clustertest.Options{})
	// ttl=0: no kernel or VFS entry cache, so every lookup below reaches
	// the VFS and its lease.
	m := testkit.StartMount(t, c, "ttl=0")
	ctx := context.Background()
	cl := c.Client(client.Config{})
	dfd := mkdirAt(t, m, "d")
	missing := func(name string) { t.Helper(); missingAt(t, dfd, name) }
	read := func(name string) string {
		t.Helper()
		fd, err := unix.Openat(dfd, name, unix.O_RDONLY, 0)
		if err != nil {
			t.Fatalf("open d/%s: %v", name, err)
		}
		defer unix.Close(fd)
		b := make([]byte, 64)
		n, err := unix.Read(fd, b)
		testkit.MustOK(t, "read d/"+name, err)
		return string(b[:n])
	}
	// Two namenode misses make the mount ask for the lease.
	missing("probe1")
	missing("probe2")
	lookups := func() uint64 {
		s, err := clientx.NamenodeStats(ctx, cl)
		testkit.MustOK(t, "stats", err)
		return s.PerOp["lookup"]
	}
	before := lookups()
	for i := 0; i < 20; i++ {
		name := fmt.Sprintf("new%d", i)
		missing(name)
		fd, err := unix.Openat(dfd, name, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY, 0o644)
		testkit.MustOK(t, "create d/"+name, err)
		_, err = unix.Write(fd, []byte(name))
		testkit.MustOK(t, "write d/"+name, err)
		testkit.MustOK(t, "close d/"+name, unix.Close(fd))
	}
	if n := lookups() - before; n >= 10 {
		t.Errorf("%d namenode lookups for 40 lookups of missing names in a leased directory, want almost none", n)
	}
	// A name the namenode would refuse gets the namenode's error, not
	// ENOENT from the lease (pjdfstest link::enametoolong_component).
	var lst unix.Stat_t
	if err := unix.Fstatat(dfd, strings.Repeat("x", 256), &lst, unix.AT_SYMLINK_NOFOLLOW); !errors.Is(err, syscall.ENAMETOOLONG) {
		t.Errorf("stat of a 256-byte name in a leased directory: %v, want ENAMETOOLONG", err)
	}
	// The mount's own names are all there (none is taken for missing).
	for i := 0; i < 20; i++ {
		if got := read(fmt.Sprintf("new%d", i)); got != fmt.Sprintf("new%d", i) {
			t.Fatalf("d/new%d holds %q", i, got)
		}
	}
	// Another client creates a name the mount has not looked up.
	d, err := clientx.Auto(cl, clientx.Durable).Lstat(ctx, "/d")
	testkit.MustOK(t, "lookup /d", err)
	_, err = clientx.At(clientx.Auto(cl, clientx.Async)).CreateAt(ctx, d.Ino, "theirs", client.CreateOptions{})
	testkit.MustOK(t, "create through the API", err)
	var st unix.Stat_t
	if err := unix.Fstatat(dfd, "theirs", &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		t.Fatalf("a name another client created in the leased directory: %v", err)
	}
}

// TestMountDirLeaseNamenodeRestart: a lease the mount got from a namenode
// that was then killed and restarted is not forgotten at the expense of
// correctness: the restarted namenode (which knows nothing of it) makes
// another client's create wait out its first lease term, by which time
// the mount's lease has ended, so the mount sees the new name at once.
func TestMountDirLeaseNamenodeRestart(t *testing.T) {
	testkit.NeedFUSE(t)
	c := clustertest.Start(t, clustertest.Options{})
	m := testkit.StartMount(t, c, "ttl=0")
	ctx := context.Background()
	dfd := mkdirAt(t, m, "d")
	for _, name := range []string{"probe1", "probe2", "probe3"} {
		missingAt(t, dfd, name)
	}
	c.Kill(c.NN)
	c.StartNamenode()
	c.WaitLive(len(c.DNs))
	cl := c.Client(client.Config{})
	defer cl.Close()
	d, err := clientx.Auto(cl, clientx.Durable).Lstat(ctx, "/d")
	testkit.MustOK(t, "lookup /d", err)
	_, err = clientx.At(clientx.Auto(cl, clientx.Async)).CreateAt(ctx, d.Ino, "after-restart", client.CreateOptions{})
	testkit.MustOK(t, "create after the restart", err)
	var st unix.Stat_t
	if err := unix.Fstatat(dfd, "after-restart", &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		t.Fatalf("a name created after the namenode restarted, through the mount: %v", err)
	}
}

// TestMountWaitsForNamenodeRestart: an operation through the mount while
// the namenode is down waits for it to come back (as an NFS hard mount
// does) instead of failing with EIO. A listener on the namenode's address
// shows when the mount has tried to reach it.
func TestMountWaitsForNamenodeRestart(t *testing.T) {
	testkit.NeedFUSE(t)
	c := clustertest.Start(t, clustertest.Options{})
	m := testkit.StartMount(t, c, "ttl=0")
	testkit.MustOK(t, "mkdir", os.Mkdir(m.Path("d"), 0o755))
	c.Kill(c.NN)
	ln, err := net.Listen("tcp", c.NN.Addr)
	testkit.MustOK(t, "listen on the namenode's address", err)
	done := make(chan error, 1)
	go func() {
		_, err := os.Stat(m.Path("d"))
		done <- err
	}()
	conn, err := ln.Accept()
	testkit.MustOK(t, "accept the mount's connection attempt", err)
	conn.Close()
	ln.Close()
	c.StartNamenode()
	if err := <-done; err != nil {
		t.Fatalf("stat through the mount across a namenode restart: %v", err)
	}
}

// mkdirAt makes directory name in the mount and returns an open
// descriptor of it (closed at the end of the test). Names looked up
// relative to it make the kernel ask for them alone, not for the
// directory again.
func mkdirAt(t *testing.T, m *testkit.Mount, name string) int {
	t.Helper()
	testkit.MustOK(t, "mkdir", os.Mkdir(m.Path(name), 0o755))
	fd, err := unix.Open(m.Path(name), unix.O_RDONLY|unix.O_DIRECTORY, 0)
	testkit.MustOK(t, "open "+name, err)
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

// missingAt checks that name does not exist in the directory dfd.
func missingAt(t *testing.T, dfd int, name string) {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("stat %s: %v, want ENOENT", name, err)
	}
}

// TestMountDirLeaseTwoMounts: two mounts creating in one directory, each
// checking right after the other's create returned that it sees the new
// name (and its own ones, and no name that was never made); and both
// making the same directory at once: exactly one succeeds.
func TestMountDirLeaseTwoMounts(t *testing.T) {
	testkit.NeedFUSE(t)
	c := clustertest.Start(t, clustertest.Options{})
	a := testkit.StartMount(t, c, "ttl=0")
	b := testkit.StartMount(t, c, "ttl=0")
	afd := mkdirAt(t, a, "d")
	bfd, err := unix.Open(b.Path("d"), unix.O_RDONLY|unix.O_DIRECTORY, 0)
	testkit.MustOK(t, "open d in the second mount", err)
	defer unix.Close(bfd)
	create := func(fd int, name string) {
		t.Helper()
		f, err := unix.Openat(fd, name, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY, 0o644)
		testkit.MustOK(t, "create "+name, err)
		testkit.MustOK(t, "close "+name, unix.Close(f))
	}
	exists := func(fd int, name, who string) {
		t.Helper()
		var st unix.Stat_t
		if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			t.Fatalf("%s: stat d/%s: %v", who, name, err)
		}
	}
	for i := 0; i < 30; i++ {
		an, bn := fmt.Sprintf("a%d", i), fmt.Sprintf("b%d", i)
		// Misses keep each mount asking for (and holding) the lease.
		missingAt(t, afd, "never-"+an)
		missingAt(t, bfd, "never-"+bn)
		create(afd, an)
		exists(bfd, an, "second mount")
		exists(afd, an, "first mount")
		create(bfd, bn)
		exists(afd, bn, "first mount")
		exists(bfd, bn, "second mount")
	}
	// The same new directory from both mounts at once.
	for i := 0; i < 10; i++ {
		name := fmt.Sprintf("both%d", i)
		errs := make(chan error, 2)
		for _, fd := range []int{afd, bfd} {
			go func() { errs <- unix.Mkdirat(fd, name, 0o755) }()
		}
		e1, e2 := <-errs, <-errs
		if (e1 == nil) == (e2 == nil) || (e1 != nil && !errors.Is(e1, syscall.EEXIST)) || (e2 != nil && !errors.Is(e2, syscall.EEXIST)) {
			t.Fatalf("mkdir d/%s from two mounts: %v and %v, want one success and one EEXIST", name, e1, e2)
		}
		exists(afd, name, "first mount")
		exists(bfd, name, "second mount")
	}
}
