package clusterup

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// cmdline returns a process's arguments.
func cmdline(t *testing.T, pid int) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err != nil {
		t.Fatalf("command line of pid %d: %v", pid, err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
}

// argAfter returns the argument after name in args, or "".
func argAfter(args []string, name string) string {
	if i := slices.Index(args, name); i >= 0 && i+1 < len(args) {
		return args[i+1]
	}
	return ""
}

// TestClusterUpKeepsSettings (issue 19 item 12): the settings a cluster is
// made with stay when it is brought up again without flags: the same
// namenode address (and ~/.plasmafs not rewritten, other clusters' entries
// in it kept), the same security levels, the same volume size for a
// datanode added later. A flag given to a later 'cluster up' changes its
// setting, and the change stays too.
func TestClusterUpKeepsSettings(t *testing.T) {
	lc := newLocalCluster(t)
	cfgPath := filepath.Join(lc.home, ".plasmafs")
	other := "plasmafs {\n  cluster {\n    clustername = \"other\";\n    security = \"none\";\n    node { addr = \"127.0.0.1:1\"; };\n  };\n}\n"
	if err := os.WriteFile(cfgPath, []byte(other), 0o600); err != nil {
		t.Fatal(err)
	}
	lc.mustRun(lc.upArgs("-detach", "-datanodes", "1", "-taskserver-slots", "0", "-security", "none", "-data-security", "none")...)
	first := lc.members()
	nnArgs := cmdline(t, first["namenode"])
	cfg, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(cfg), `clustername = "other"`) || !strings.Contains(string(cfg), argAfter(nnArgs, "-listen")) {
		t.Fatalf("~/.plasmafs after cluster up lost the other cluster or lacks the namenode %s:\n%s", argAfter(nnArgs, "-listen"), cfg)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(cfgPath, &st); err != nil {
		t.Fatal(err)
	}
	lc.mustRun("mkdir", "/kept")
	lc.mustRun("cluster", "down", "-dir", lc.dir)

	// Up again with no flags but the directory (and one more datanode).
	out := lc.mustRun("cluster", "up", "-detach", "-dir", lc.dir, "-datanodes", "2")
	again := lc.members()
	nnArgs2 := cmdline(t, again["namenode"])
	for _, flag := range []string{"-listen", "-security"} {
		if a, b := argAfter(nnArgs, flag), argAfter(nnArgs2, flag); a != b {
			t.Errorf("namenode %s was %s, is %s after cluster up again:\n%s", flag, a, b, out)
		}
	}
	if s := argAfter(cmdline(t, again["dn2"]), "-security"); s != "none" {
		t.Errorf("the datanode added later runs at data security %q, the cluster was made with none", s)
	}
	var st2 syscall.Stat_t
	if err := syscall.Stat(cfgPath, &st2); err != nil {
		t.Fatal(err)
	}
	if cfg2, _ := os.ReadFile(cfgPath); string(cfg2) != string(cfg) || st2.Ino != st.Ino {
		t.Errorf("~/.plasmafs was rewritten (inode %d, now %d):\nbefore:\n%s\nafter:\n%s", st.Ino, st2.Ino, cfg, cfg2)
	}
	// The new datanode's volume has the size the cluster was made with
	// (2 MiB: 32 blocks of 64 KiB), not the default 4 GiB.
	lc.mustRun("stat", "/kept")
	if fs := lc.mustRun("fsstat"); !strings.Contains(fs, "total blocks:     64 ") {
		t.Errorf("fsstat after adding a datanode (want 2 volumes of 32 blocks):\n%s", fs)
	}

	// A flag given now changes the setting, for this and later starts.
	lc.mustRun("cluster", "down", "-dir", lc.dir)
	lc.mustRun("cluster", "up", "-detach", "-dir", lc.dir, "-data-security", "integrity")
	lc.mustRun("cluster", "down", "-dir", lc.dir)
	lc.mustRun("cluster", "up", "-detach", "-dir", lc.dir)
	m := lc.members()
	if s := argAfter(cmdline(t, m["dn1"]), "-security"); s != "integrity" {
		t.Errorf("data security %q after it was changed to integrity", s)
	}
	if s := argAfter(cmdline(t, m["namenode"]), "-security"); s != "none" {
		t.Errorf("namenode security %q, the cluster was made with none", s)
	}
	if _, ok := m["dn2"]; !ok {
		t.Errorf("the second datanode, added by an earlier cluster up, is not running: %v", m)
	}
	lc.mustRun("stat", "/kept")

	// A cluster made by a version that recorded no settings: they are
	// taken from its client configuration and volumes.
	lc.mustRun("cluster", "down", "-dir", lc.dir)
	if err := os.Remove(filepath.Join(lc.dir, "settings.json")); err != nil {
		t.Fatal(err)
	}
	lc.mustRun("cluster", "up", "-detach", "-dir", lc.dir)
	m = lc.members()
	args := cmdline(t, m["namenode"])
	if argAfter(args, "-listen") != argAfter(nnArgs, "-listen") || argAfter(args, "-security") != "none" || argAfter(cmdline(t, m["dn1"]), "-security") != "integrity" {
		t.Errorf("cluster without settings.json came back with namenode %q, datanode %q", args, cmdline(t, m["dn1"]))
	}
	if _, ok := m["dn2"]; !ok {
		t.Errorf("cluster without settings.json came back without its second datanode: %v", m)
	}
}
