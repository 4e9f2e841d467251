package mount

import (
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestMountCreatesForTheCaller: through a mount with allow_other (its
// credential a superuser's, as 'cluster up' gives it), what a local user
// creates is that user's: files, directories, symlinks and FIFOs made by
// nobody (uid 65534) belong to nobody in the mount and in PlasmaFS; in a
// setgid directory they take the directory's group and new directories
// stay setgid (POSIX); another user still cannot write where the kernel's
// permission check says no.
func TestMountCreatesForTheCaller(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	m := testkit.StartMount(t, c, "allow_other")
	// The test's temporary directories (0700) must let nobody reach the mount.
	tmp := filepath.Clean(os.TempDir())
	for d := filepath.Dir(m.Dir); strings.HasPrefix(d, tmp+"/"); d = filepath.Dir(d) {
		testkit.MustOK(t, "chmod "+d, os.Chmod(d, 0o755))
	}
	testkit.MustOK(t, "mkdir shared", os.Mkdir(m.Path("shared"), 0o777))
	testkit.MustOK(t, "chmod shared", os.Chmod(m.Path("shared"), 0o777))
	testkit.MustOK(t, "mkdir sg", os.Mkdir(m.Path("shared/sg"), 0o777))
	testkit.MustOK(t, "chown sg", os.Chown(m.Path("shared/sg"), 0, 4242))
	testkit.MustOK(t, "chmod sg", os.Chmod(m.Path("shared/sg"), 0o777|fs.ModeSetgid))
	testkit.MustOK(t, "mkdir private", os.Mkdir(m.Path("private"), 0o755))

	asNobody := func(script string) ([]byte, error) {
		cmd := exec.Command("sh", "-c", script)
		cmd.Dir = m.Dir
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		return cmd.CombinedOutput()
	}
	if out, err := asNobody("echo hi > shared/f && mkdir shared/d && ln -s f shared/l && mkfifo shared/p && echo x > shared/sg/f && mkdir shared/sg/sub"); err != nil {
		t.Fatalf("creating as nobody: %v: %s", err, out)
	}
	owner := func(name string) (uid, gid uint32, mode fs.FileMode) {
		t.Helper()
		fi, err := os.Lstat(m.Path(name))
		testkit.MustOK(t, "lstat "+name, err)
		st := fi.Sys().(*syscall.Stat_t)
		return st.Uid, st.Gid, fi.Mode()
	}
	for _, name := range []string{"shared/f", "shared/d", "shared/l", "shared/p"} {
		if uid, gid, _ := owner(name); uid != 65534 || gid != 65534 {
			t.Errorf("%s created by nobody: owner %d:%d, want 65534:65534", name, uid, gid)
		}
	}
	if uid, gid, _ := owner("shared/sg/f"); uid != 65534 || gid != 4242 {
		t.Errorf("file created by nobody in a setgid directory of group 4242: owner %d:%d, want 65534:4242", uid, gid)
	}
	if uid, gid, mode := owner("shared/sg/sub"); uid != 65534 || gid != 4242 || mode&fs.ModeSetgid == 0 {
		t.Errorf("directory created by nobody in a setgid directory: owner %d:%d mode %v, want 65534:4242 and setgid", uid, gid, mode)
	}
	// The namenode records the owner by name.
	cl := c.Client(client.Config{})
	defer cl.Close()
	ctx := context.Background()
	tx := cl.Begin()
	defer tx.Abort(ctx)
	fi, err := tx.Lstat(ctx, "/shared/f")
	testkit.MustOK(t, "stat /shared/f", err)
	if fi.User != "nobody" {
		t.Errorf("/shared/f in PlasmaFS belongs to %q, want nobody", fi.User)
	}
	// The namenode gives the setgid directory's group to what the API
	// creates there too.
	created, err := tx.CreateFile(ctx, "/shared/sg/api", client.CreateOptions{})
	testkit.MustOK(t, "create /shared/sg/api", err)
	created.Close()
	if fi, err := tx.Lstat(ctx, "/shared/sg/api"); err != nil || fi.Group != "4242" {
		t.Errorf("file created through the API in a setgid directory of group 4242: group %q, %v", fi.Group, err)
	}
	// The kernel still checks the caller's permissions.
	if out, err := asNobody("touch private/x"); err == nil {
		t.Errorf("nobody created a file in a 0755 directory of root: %s", out)
	}
}
