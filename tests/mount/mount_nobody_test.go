package mount

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestMountNobodyOwnsNoGhosts: through a mount with allow_other, where
// the kernel checks permissions against the owners the mount shows, a
// local process running as nobody (uid 65534, as many daemons and, with
// 'mr taskserver -task-uids none', every MapReduce task do) must not
// own the files of PlasmaFS users without a local account, which show as
// nobody too: it reads neither their 0600 file nor, through the group,
// their 0640 one, and cannot chmod them.
func TestMountNobodyOwnsNoGhosts(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	testkit.PutOwned(t, c, "/ghost-own", "ghost's own\n", "ghost:ghost", "600")
	testkit.PutOwned(t, c, "/ghost-group", "ghost's group's\n", "ghost:ghost", "640")
	m := testkit.StartMount(t, c, "allow_other")
	tmp := filepath.Clean(os.TempDir())
	for d := filepath.Dir(m.Dir); strings.HasPrefix(d, tmp+"/"); d = filepath.Dir(d) {
		testkit.MustOK(t, "chmod "+d, os.Chmod(d, 0o755))
	}
	asNobody := func(script string) (string, error) {
		cmd := exec.Command("sh", "-c", script)
		cmd.Dir = m.Dir
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := asNobody("ls -ln ghost-own ghost-group"); err != nil {
		t.Fatalf("nobody cannot list the files: %v: %s", err, out)
	} else {
		t.Logf("as nobody:\n%s", out)
	}
	for _, script := range []string{"cat ghost-own", "cat ghost-group", "chmod 666 ghost-own"} {
		if out, err := asNobody(script); err == nil {
			t.Errorf("nobody's %q through the mount succeeded: %s", script, out)
		}
	}
}
