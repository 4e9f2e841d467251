package mount

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestMountLifecycle: SIGTERM and 'plasma umount' unmount cleanly (the
// mount process exits 0); after kill -9 of the mount process 'plasma
// umount -f' clears the stale mount, the directory can be mounted again,
// and the cluster is consistent.
func TestMountLifecycle(t *testing.T) {
	testkit.NeedFUSE(t)
	c := clustertest.Start(t, clustertest.Options{})

	m := testkit.StartMount(t, c)
	testkit.MustOK(t, "write", os.WriteFile(m.Path("a"), []byte("one"), 0o644))
	m.Signal(syscall.SIGTERM)
	if code := m.Wait(); code != 0 {
		t.Fatalf("mount process exited %d after SIGTERM", code)
	}
	if testkit.IsMounted(m.Dir) {
		t.Fatal("still mounted after SIGTERM")
	}

	m = testkit.StartMount(t, c)
	if got, err := os.ReadFile(m.Path("a")); err != nil || string(got) != "one" {
		t.Fatalf("file written before the remount: %q %v", got, err)
	}
	c.MustRun("umount", m.Dir)
	if code := m.Wait(); code != 0 {
		t.Fatalf("mount process exited %d after plasma umount", code)
	}
	if testkit.IsMounted(m.Dir) {
		t.Fatal("still mounted after plasma umount")
	}

	m = testkit.StartMount(t, c)
	f, err := os.Create(m.Path("open-during-kill"))
	testkit.MustOK(t, "create", err)
	_, err = f.Write(bytes.Repeat([]byte("x"), 300000))
	testkit.MustOK(t, "write", err)
	m.Signal(syscall.SIGKILL)
	m.Wait()
	f.Close()
	if _, err := os.Stat(m.Path("a")); !errors.Is(err, syscall.ENOTCONN) {
		t.Fatalf("stat in a mount whose process was killed: %v, want ENOTCONN", err)
	}
	if out, code := c.Run(nil, "umount", m.Dir); code == 0 {
		t.Logf("plasma umount without -f cleared the stale mount: %s", out)
	} else {
		c.MustRun("umount", "-f", m.Dir)
	}
	if testkit.IsMounted(m.Dir) {
		t.Fatal("stale mount still there after plasma umount -f")
	}
	if _, err := os.ReadDir(m.Dir); err != nil {
		t.Fatalf("mountpoint unusable after umount -f: %v", err)
	}
	c.MustRun("fsck")
	m2 := testkit.StartMount(t, c)
	if got, err := os.ReadFile(m2.Path("a")); err != nil || string(got) != "one" {
		t.Fatalf("after remounting: %q %v", got, err)
	}

	// -detach returns once mounted.
	dir := filepath.Join(t.TempDir(), "detached")
	testkit.MustOK(t, "mkdir", os.Mkdir(dir, 0o755))
	out := c.MustRun("mount", "-detach", dir)
	t.Cleanup(func() {
		if testkit.IsMounted(dir) {
			syscall.Unmount(dir, syscall.MNT_DETACH)
		}
	})
	if !testkit.IsMounted(dir) {
		t.Fatalf("mount -detach returned (%s) but nothing is mounted", out)
	}
	if got, err := os.ReadFile(filepath.Join(dir, "a")); err != nil || string(got) != "one" {
		t.Fatalf("through the detached mount: %q %v", got, err)
	}
	c.MustRun("umount", dir)
}

// TestMountTwoMountsSeeEachOther: a change committed through one mount
// (close) is seen through another mount of the same cluster once its
// caches expire; with ttl=0 at once.
func TestMountTwoMountsSeeEachOther(t *testing.T) {
	testkit.NeedFUSE(t)
	c := clustertest.Start(t, clustertest.Options{})
	a := testkit.StartMount(t, c)
	b := testkit.StartMount(t, c, "ttl=0")
	testkit.MustOK(t, "write", os.WriteFile(a.Path("f"), []byte("v1"), 0o644))
	if got, err := os.ReadFile(b.Path("f")); err != nil || string(got) != "v1" {
		t.Fatalf("other mount: %q %v", got, err)
	}
	testkit.MustOK(t, "rewrite", os.WriteFile(a.Path("f"), []byte("version 2"), 0o644))
	if got, err := os.ReadFile(b.Path("f")); err != nil || string(got) != "version 2" {
		t.Fatalf("other mount after rewrite: %q %v", got, err)
	}
	testkit.MustOK(t, "rename", os.Rename(a.Path("f"), a.Path("g")))
	if _, err := os.Stat(b.Path("f")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("renamed-away name in the other mount: %v", err)
	}
	if got, err := os.ReadFile(b.Path("g")); err != nil || string(got) != "version 2" {
		t.Fatalf("renamed file in the other mount: %q %v", got, err)
	}
}

// makeTree writes a tree of directories and files of various sizes.
func makeTree(t *testing.T, root string) {
	t.Helper()
	n := 0
	for d := 0; d < 5; d++ {
		dir := filepath.Join(root, fmt.Sprintf("dir%d", d), "sub")
		testkit.MustOK(t, "mkdir", os.MkdirAll(dir, 0o755))
		for i := 0; i < 12; i++ {
			n++
			size := (n * 7919) % 200000
			if i%4 == 0 {
				size = i
			}
			testkit.MustOK(t, "write", os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%02d.bin", i)), testkit.SeededBytes(size, uint64(n)), 0o644))
		}
		testkit.MustOK(t, "symlink", os.Symlink("sub/f01.bin", filepath.Join(root, fmt.Sprintf("dir%d", d), "link")))
	}
}

// TestMountPrograms: programs nobody here wrote, through the mount: cp -r
// and cp -a in and out, tar x and tar c, a make + gcc build of a few C
// files, rsync -a twice, git clone/commit/gc/fsck, sqlite3.
func TestMountPrograms(t *testing.T) {
	testkit.NeedFUSE(t)
	c := clustertest.Start(t, clustertest.Options{})
	m := testkit.StartMount(t, c)
	src := filepath.Join(t.TempDir(), "src")
	makeTree(t, src)
	work := t.TempDir()

	t.Run("cp", func(t *testing.T) {
		testkit.Shell(t, work, "cp -r "+src+" "+m.Path("cp"))
		testkit.Shell(t, work, "diff -r "+src+" "+m.Path("cp"))
		testkit.Shell(t, work, "cp -a "+m.Path("cp")+" back && diff -r "+src+" back")
	})
	t.Run("tar", func(t *testing.T) {
		testkit.Shell(t, work, "tar cf src.tar -C "+src+" .")
		testkit.MustOK(t, "mkdir", os.Mkdir(m.Path("tar"), 0o755))
		testkit.Shell(t, work, "tar xf src.tar -C "+m.Path("tar"))
		testkit.Shell(t, work, "diff -r "+src+" "+m.Path("tar"))
		// tar c back out of the mount: the same members and contents.
		testkit.Shell(t, work, "tar cf again.tar -C "+m.Path("tar")+" . && mkdir again && tar xf again.tar -C again && diff -r "+src+" again")
	})
	t.Run("make", func(t *testing.T) {
		if _, err := exec.LookPath("gcc"); err != nil {
			t.Fatal("no gcc: make test installs it")
		}
		if _, err := exec.LookPath("make"); err != nil {
			t.Fatal("no make: make test installs it")
		}
		dir := m.Path("build")
		testkit.MustOK(t, "mkdir", os.Mkdir(dir, 0o755))
		var objs, calls []string
		for i := 0; i < 6; i++ {
			testkit.MustOK(t, "write", os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%d.c", i)),
				[]byte(fmt.Sprintf("#include \"common.h\"\nint f%d(int x) { return x * %d + K; }\n", i, i+2)), 0o644))
			objs = append(objs, fmt.Sprintf("f%d.o", i))
			calls = append(calls, fmt.Sprintf("f%d(%d)", i, i))
		}
		testkit.MustOK(t, "write", os.WriteFile(filepath.Join(dir, "common.h"), []byte("#define K 1\n"), 0o644))
		var decl strings.Builder
		for i := 0; i < 6; i++ {
			fmt.Fprintf(&decl, "int f%d(int);\n", i)
		}
		testkit.MustOK(t, "write", os.WriteFile(filepath.Join(dir, "main.c"), []byte("#include <stdio.h>\n"+decl.String()+
			"int main(void) { printf(\"%d\\n\", "+strings.Join(calls, " + ")+"); return 0; }\n"), 0o644))
		testkit.MustOK(t, "write", os.WriteFile(filepath.Join(dir, "Makefile"), []byte("prog: main.o "+strings.Join(objs, " ")+
			"\n\tgcc -o $@ $^\n%.o: %.c common.h\n\tgcc -O1 -c -o $@ $<\n"), 0o644))
		testkit.Shell(t, dir, "make -j2")
		out := testkit.Shell(t, dir, "./prog")
		want := 0
		for i := 0; i < 6; i++ {
			want += i*(i+2) + 1
		}
		if strings.TrimSpace(out) != fmt.Sprint(want) {
			t.Fatalf("prog printed %q, want %d", out, want)
		}
		// Nothing to do the second time: the timestamps survived.
		if out := testkit.Shell(t, dir, "make"); !strings.Contains(out, "up to date") {
			t.Fatalf("second make rebuilt: %s", out)
		}
	})
	t.Run("cp-a", func(t *testing.T) {
		// Modes, times and symlinks survive a cp -a in and out.
		testkit.MustOK(t, "chmod", os.Chmod(filepath.Join(src, "dir0"), 0o751))
		testkit.Shell(t, work, "cp -a "+src+" "+m.Path("cpa")+" && cp -a "+m.Path("cpa")+" cpa-back")
		list := "find . -printf '%y %m %TY-%Tm-%Td-%TH:%TM:%TS %s %l %p\\n' | sort"
		if a, b := testkit.Shell(t, src, list), testkit.Shell(t, filepath.Join(work, "cpa-back"), list); a != b {
			t.Fatalf("cp -a through the mount changed the tree:\n%s\nvs\n%s", a, b)
		}
	})
	t.Run("rsync", func(t *testing.T) {
		needTool(t, "rsync")
		testkit.Shell(t, work, "rsync -a "+src+"/ "+m.Path("rsync")+"/")
		testkit.Shell(t, work, "diff -r "+src+" "+m.Path("rsync"))
		out := testkit.Shell(t, work, "rsync -a --stats "+src+"/ "+m.Path("rsync")+"/")
		if !strings.Contains(out, "Number of regular files transferred: 0") {
			t.Fatalf("the second rsync -a transferred files again:\n%s", out)
		}
	})
	t.Run("git", func(t *testing.T) {
		needTool(t, "git")
		repo := filepath.Join(work, "repo")
		git := "git -c user.name=t -c user.email=t@example.org "
		testkit.Shell(t, work, "git init -q "+repo+" && cp -r "+src+"/. "+repo+"/")
		for i := 0; i < 5; i++ {
			testkit.MustOK(t, "write", os.WriteFile(filepath.Join(repo, "log.txt"), []byte(strings.Repeat(fmt.Sprintf("commit %d\n", i), i+1)), 0o644))
			testkit.Shell(t, repo, git+"add -A && "+git+"commit -q -m c"+fmt.Sprint(i))
		}
		testkit.Shell(t, work, "git clone -q "+repo+" "+m.Path("clone"))
		testkit.Shell(t, m.Path("clone"), "git fsck --full --strict")
		if a, b := testkit.Shell(t, repo, "git rev-parse HEAD"), testkit.Shell(t, m.Path("clone"), "git rev-parse HEAD"); a != b {
			t.Fatalf("clone HEAD %s, want %s", b, a)
		}
		// Work inside the mount: a commit there, then a clone back out.
		testkit.MustOK(t, "write", os.WriteFile(m.Path("clone/new.txt"), []byte("made in the mount\n"), 0o644))
		testkit.Shell(t, m.Path("clone"), git+"add new.txt && "+git+"commit -q -m in-mount && git gc -q && git fsck --full")
		testkit.Shell(t, work, "git clone -q "+m.Path("clone")+" out && cat out/new.txt")
	})
	t.Run("sqlite3", func(t *testing.T) {
		needTool(t, "sqlite3")
		db := m.Path("db.sqlite")
		testkit.Shell(t, work, "sqlite3 "+db+" 'CREATE TABLE t(k INTEGER PRIMARY KEY, v TEXT);'")
		var sql strings.Builder
		sql.WriteString("BEGIN;")
		for i := 0; i < 2000; i++ {
			fmt.Fprintf(&sql, "INSERT INTO t(v) VALUES ('%s');", strings.Repeat("v", i%97))
		}
		sql.WriteString("COMMIT;")
		testkit.MustOK(t, "write", os.WriteFile(filepath.Join(work, "ins.sql"), []byte(sql.String()), 0o644))
		testkit.Shell(t, work, "sqlite3 "+db+" < ins.sql")
		// A few single-statement transactions (journal, fsync, delete).
		for i := 0; i < 5; i++ {
			testkit.Shell(t, work, "sqlite3 "+db+" \"UPDATE t SET v = 'x' WHERE k = "+fmt.Sprint(i+1)+"\"")
		}
		out := testkit.Shell(t, work, "sqlite3 "+db+" 'PRAGMA integrity_check; SELECT count(*), sum(length(v)) FROM t;'")
		want := 0
		for i := 0; i < 2000; i++ {
			want += i % 97
		}
		want += 5 - (0 + 1 + 2 + 3 + 4) // rows 1..5 hold "x" now
		if exp := fmt.Sprintf("ok\n2000|%d", want); strings.TrimSpace(out) != exp {
			t.Fatalf("sqlite3 in the mount: %q, want %q", out, exp)
		}
	})
	c.MustRun("fsck")
}

// needTool fails (never skips) when a program the test drives is missing:
// make test installs it.
func needTool(t *testing.T, name string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		t.Fatalf("%s not installed: make test installs it (make deps)", name)
	}
}
