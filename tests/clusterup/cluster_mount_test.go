package clusterup

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/plasmafs/plasma/tests/testkit"
)

// mountProcess finds the 'plasma mount' process serving mp (by its
// command line), or 0.
func mountProcess(mp string) int {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		argv := strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
		if len(argv) >= 3 && argv[1] == "mount" && argv[len(argv)-1] == mp {
			return pid
		}
	}
	return 0
}

// inProcMounts reports whether /proc/mounts lists a mount at mp.
func inProcMounts(t *testing.T, mp string) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/mounts")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 1 && testkit.UnescapeMountPath(f[1]) == mp {
			return true
		}
	}
	return false
}

// mountCluster returns a new local cluster and a mountpoint for a
// 'cluster up -mount' test; whatever happens, nothing stays mounted there
// after the test.
func mountCluster(t *testing.T) (*localCluster, string) {
	testkit.NeedFUSE(t)
	mp := filepath.Join(t.TempDir(), "mnt")
	lc := newLocalCluster(t)
	// Runs before the cluster's own cleanup (cluster down).
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(lc.dir, "mount.log"))
			t.Logf("mount.log:\n%s", b)
		}
		if testkit.IsMounted(mp) {
			syscall.Unmount(mp, syscall.MNT_DETACH)
		}
	})
	return lc, mp
}

// catIs checks that 'plasma cat path' prints want.
func (lc *localCluster) catIs(path string, want []byte) {
	lc.t.Helper()
	if got := lc.mustRun("cat", path); got != string(want) {
		lc.t.Fatalf("plasma cat %s: %d bytes, not the %d written through the mount", path, len(got), len(want))
	}
}

// TestClusterUpMount (issue 10 item 2): 'cluster up -detach -mount DIR'
// mounts the new cluster at DIR. Files written through the mount are
// committed at close and read back with 'plasma cat'; a mount process that
// dies (kill -9, leaving the mount stale) is restarted and mounted again;
// 'cluster down' stops it and leaves no mount behind.
func TestClusterUpMount(t *testing.T) {
	lc, mp := mountCluster(t)
	out := lc.mustRun(lc.upArgs("-detach", "-mount", mp)...)
	if !strings.Contains(out, "is up") || !strings.Contains(out, "mounted at "+mp) {
		t.Fatalf("cluster up -detach -mount:\n%s", out)
	}
	if !inProcMounts(t, mp) {
		t.Fatalf("%s is not in /proc/mounts after cluster up -mount", mp)
	}
	pid := mountProcess(mp)
	if !testkit.ProcessRunning(pid) {
		t.Fatal("no plasma mount process")
	}
	if pf := lc.pidsFile(); pf["mount"] != pid {
		t.Errorf("pids file %v does not name the mount process %d", pf, pid)
	}

	data := testkit.RandomBytes(t, 100<<10)
	if err := os.WriteFile(filepath.Join(mp, "f"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(mp, "d", "e"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(mp, "d", "e", "small"), []byte("through the mount\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	lc.catIs("/f", data)
	lc.catIs("/d/e/small", []byte("through the mount\n"))
	// And the other way round.
	src := filepath.Join(t.TempDir(), "src")
	os.WriteFile(src, []byte("put with plasma\n"), 0o644)
	lc.mustRun("put", "-q", src, "/d/put")
	if b, err := os.ReadFile(filepath.Join(mp, "d", "put")); err != nil || string(b) != "put with plasma\n" {
		t.Fatalf("file put with plasma, read through the mount: %q, %v", b, err)
	}

	// The mount process dies: the mount is stale until the supervisor
	// clears it and mounts again.
	syscall.Kill(pid, syscall.SIGKILL)
	var pid2 int
	testkit.AwaitCond(t, 60*time.Second, "the mount process was not restarted", func() bool {
		pid2 = mountProcess(mp)
		return pid2 != 0 && pid2 != pid && testkit.ProcessRunning(pid2)
	})
	testkit.AwaitCond(t, 60*time.Second, "the restarted mount does not serve the cluster", func() bool {
		b, err := os.ReadFile(filepath.Join(mp, "f"))
		return err == nil && bytes.Equal(b, data)
	})
	if log, _ := os.ReadFile(filepath.Join(lc.dir, "cluster.log")); !strings.Contains(string(log), "mount (pid "+strconv.Itoa(pid)+") died") {
		t.Errorf("cluster.log does not report the mount process's death:\n%s", log)
	}
	if err := os.WriteFile(filepath.Join(mp, "d", "after"), []byte("after the restart\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	lc.catIs("/d/after", []byte("after the restart\n"))
	if out := lc.mustRun("fsck"); !strings.Contains(out, " 0 problems") {
		t.Errorf("fsck:\n%s", out)
	}

	before := lc.members()
	before["mount"] = pid2
	lc.mustRun("cluster", "down", "-dir", lc.dir)
	for role, p := range before {
		if testkit.ProcessRunning(p) {
			t.Errorf("%s (pid %d) still running after cluster down", role, p)
		}
	}
	if inProcMounts(t, mp) {
		t.Fatalf("%s still in /proc/mounts after cluster down", mp)
	}
}

// TestClusterUpMountForegroundInterrupt: in the foreground, Ctrl-C
// (SIGINT) stops the cluster and unmounts it, even while a process holds
// a file open in the mount (the mount is detached then); exit status 0.
func TestClusterUpMountForegroundInterrupt(t *testing.T) {
	lc, mp := mountCluster(t)
	cmd := lc.command(lc.upArgs("-mount", mp)...)
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	out := testkit.WatchOutput(pr)
	exited := make(chan error, 1)
	go func() { err := cmd.Wait(); pw.Close(); exited <- err }()
	t.Cleanup(func() { cmd.Process.Kill() })
	out.WaitFor(t, "is up", exited)
	if !inProcMounts(t, mp) {
		t.Fatalf("%s is not in /proc/mounts after cluster up -mount:\n%s", mp, out)
	}
	if err := os.WriteFile(filepath.Join(mp, "closed"), []byte("committed at close\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	lc.catIs("/closed", []byte("committed at close\n"))
	busy, err := os.Create(filepath.Join(mp, "open"))
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	before := lc.members()
	before["mount"] = mountProcess(mp)
	cmd.Process.Signal(syscall.SIGINT)
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("cluster up ended with %v after SIGINT:\n%s", err, out)
		}
	case <-time.After(120 * time.Second):
		t.Fatalf("cluster up still running 120s after SIGINT:\n%s", out)
	}
	for role, p := range before {
		if testkit.ProcessRunning(p) {
			t.Errorf("%s (pid %d) still running after SIGINT", role, p)
		}
	}
	if inProcMounts(t, mp) {
		t.Fatalf("%s still in /proc/mounts after the cluster stopped", mp)
	}
	if _, err := busy.Write([]byte("x")); err == nil {
		if err := busy.Sync(); err == nil {
			t.Errorf("writes to a file of the stopped mount still succeed")
		}
	}
}

// TestClusterDownClearsStaleMount: with the supervisor and the mount
// process both killed (kill -9), 'cluster down' stops the other members
// and clears the stale mount; a new 'cluster up -mount' of the same
// directory mounts again and sees the files.
func TestClusterDownClearsStaleMount(t *testing.T) {
	lc, mp := mountCluster(t)
	lc.mustRun(lc.upArgs("-detach", "-mount", mp)...)
	if err := os.WriteFile(filepath.Join(mp, "kept"), []byte("kept\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m := lc.members()
	lc.killMember(m, "supervisor")
	syscall.Kill(mountProcess(mp), syscall.SIGKILL)
	testkit.AwaitCond(t, 30*time.Second, "the killed mount process is gone", func() bool {
		_, err := os.Stat(mp)
		return errors.Is(err, syscall.ENOTCONN)
	})
	if !inProcMounts(t, mp) {
		t.Fatal("the stale mount is not in /proc/mounts")
	}
	lc.mustRun("cluster", "down", "-dir", lc.dir)
	for role, p := range m {
		if testkit.ProcessRunning(p) {
			t.Errorf("%s (pid %d) still running after cluster down", role, p)
		}
	}
	if inProcMounts(t, mp) {
		t.Fatalf("%s still in /proc/mounts after cluster down", mp)
	}

	// The same cluster and mountpoint again.
	lc.mustRun(lc.upArgs("-detach", "-mount", mp)...)
	if b, err := os.ReadFile(filepath.Join(mp, "kept")); err != nil || string(b) != "kept\n" {
		t.Fatalf("after a new cluster up -mount: %q, %v", b, err)
	}
	lc.mustRun("cluster", "down", "-dir", lc.dir)
	if inProcMounts(t, mp) {
		t.Fatalf("%s still in /proc/mounts after the second cluster down", mp)
	}
}

// TestClusterUpMountRefusesBusyMountpoint: a mountpoint that already has
// a working mount is refused before anything starts, and left alone.
func TestClusterUpMountRefusesBusyMountpoint(t *testing.T) {
	lc, mp := mountCluster(t)
	os.MkdirAll(mp, 0o755)
	if err := syscall.Mount("tmpfs", mp, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	defer syscall.Unmount(mp, 0)
	out, code := lc.run(lc.upArgs("-detach", "-mount", mp)...)
	if code == 0 || !strings.Contains(out, "already a mountpoint") {
		t.Fatalf("cluster up -mount on a tmpfs mountpoint: exit %d:\n%s", code, out)
	}
	if len(lc.members()) != 0 {
		t.Errorf("processes started: %v", lc.members())
	}
	if !inProcMounts(t, mp) {
		t.Errorf("the tmpfs at %s was unmounted", mp)
	}
}

// TestBenchThroughClusterMount: the mount benchmarks of bench/run work
// on a 'cluster up -mount' mount (tiny sizes; no figures are checked):
// the C build, metarates and fdtree through the mount, each beside a
// local directory and go-fuse's loopback filesystem, in the same run.
func TestBenchThroughClusterMount(t *testing.T) {
	lc, mp := mountCluster(t)
	lc.mustRun(lc.upArgs("-detach", "-mount", mp)...)
	for _, d := range []string{"build", "meta", "fdtree"} {
		if err := os.Mkdir(filepath.Join(mp, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	local := t.TempDir()
	type report struct {
		Results []struct {
			Name    string  `json:"name"`
			Ours    float64 `json:"ours"`
			RefName string  `json:"reference_name"`
			Ratio   float64 `json:"ratio"`
		} `json:"results"`
	}
	for _, c := range []struct {
		name string
		args []string
	}{
		{"build", []string{"-files", "2", "-runs", "1"}},
		{"metarates", []string{"-n", "20", "-np", "1,2"}},
		{"fdtree", []string{"-levels", "1", "-dirs", "2", "-files", "2"}},
	} {
		target := filepath.Join(mp, map[string]string{"build": "build", "metarates": "meta", "fdtree": "fdtree"}[c.name])
		ref := filepath.Join(local, c.name)
		os.Mkdir(ref, 0o755)
		args := append([]string{"bench", c.name, "-json", "-target", target, "-ref", ref, "-loopback", filepath.Join(local, c.name+"-loop")}, c.args...)
		out := lc.mustRun(args...)
		var rep report
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("plasma bench %s: %v\n%s", c.name, err, out)
		}
		refs := map[string]int{}
		for _, r := range rep.Results {
			if r.Ours <= 0 && !strings.Contains(r.Name, "efficiency") {
				t.Errorf("bench %s: %+v", c.name, r)
			}
			switch {
			case strings.Contains(r.RefName, "fuse.loopback") || strings.HasPrefix(r.RefName, "go-fuse loopback"):
				refs["loopback"]++
			case strings.HasSuffix(r.RefName, ref):
				refs["local"]++
			default:
				t.Errorf("bench %s: result %q beside %q", c.name, r.Name, r.RefName)
			}
		}
		if refs["loopback"] == 0 || refs["loopback"] != refs["local"] {
			t.Errorf("bench %s: results beside the references: %v", c.name, refs)
		}
		if testkit.IsMounted(filepath.Join(local, c.name+"-loop")) {
			t.Errorf("bench %s left the loopback mounted", c.name)
		}
	}
	if b, _ := os.ReadFile("/proc/mounts"); strings.Contains(string(b), "fuse.loopback") && strings.Contains(string(b), local) {
		t.Errorf("a loopback mount of the test's directories is left:\n%s", b)
	}
	lc.mustRun("cluster", "down", "-dir", lc.dir)
}
