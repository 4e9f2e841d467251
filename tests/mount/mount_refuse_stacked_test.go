package mount

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestMountRefusesMountPoint (issue 19 item 8a): 'plasma mount' on a
// directory that is already a mount point (a PlasmaFS mount, or any other
// filesystem) refuses with exit status 1 and says why, instead of
// stacking a second mount on it.
func TestMountRefusesMountPoint(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	m := testkit.StartMount(t, c)
	testkit.MustOK(t, "write", os.WriteFile(m.Path("f"), []byte("first mount"), 0o644))

	tmpfs := filepath.Join(t.TempDir(), "tmpfs")
	testkit.MustOK(t, "mkdir", os.Mkdir(tmpfs, 0o755))
	testkit.MustOK(t, "mount tmpfs", syscall.Mount("tmpfs", tmpfs, "tmpfs", 0, "size=1m"))
	t.Cleanup(func() { unmountAll(tmpfs) })

	for _, dir := range []string{m.Dir, tmpfs} {
		before := mountsAt(dir)
		t.Cleanup(func() {
			// What the command stacked (before the fix) goes again.
			for mountsAt(dir) > before {
				if syscall.Unmount(dir, syscall.MNT_DETACH) != nil {
					break
				}
			}
		})
		out, code := c.Run(nil, "mount", "-detach", dir)
		if code != 1 {
			t.Errorf("plasma mount -detach %s (a mount point already): exit %d, want 1:\n%s", dir, code, out)
		}
		if !strings.Contains(out, "already a mount point") {
			t.Errorf("plasma mount %s: the message does not say it is a mount point already:\n%s", dir, out)
		}
		if n := mountsAt(dir); n != before {
			t.Errorf("%s: %d mounts after plasma mount, %d before", dir, n, before)
		}
	}
	got, err := os.ReadFile(m.Path("f"))
	if err != nil || string(got) != "first mount" {
		t.Errorf("the first mount does not work any more: %q, %v", got, err)
	}
}

// mountsAt counts the mounts at dir in /proc/self/mountinfo.
func mountsAt(dir string) int {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return 0
	}
	n := 0
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) > 4 && testkit.UnescapeMountPath(f[4]) == dir {
			n++
		}
	}
	return n
}

// unmountAll detaches every mount at dir.
func unmountAll(dir string) {
	for mountsAt(dir) > 0 {
		if syscall.Unmount(dir, syscall.MNT_DETACH) != nil {
			return
		}
	}
}
