package cli

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestCLIShellHabits (issue 19 item 14): what a user of a Unix shell or of
// HDFS expects works: ls -R, ls -lh (-h is human-readable sizes, -help
// the help), du and du -s, df, put -r and get -r of a directory tree (a
// progress bar on a terminal, none otherwise), setrep with and without -R.
func TestCLIShellHabits(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Datanodes: 2, Size: 16 << 20})
	tmp := t.TempDir()
	tree := filepath.Join(tmp, "tree")
	os.MkdirAll(filepath.Join(tree, "sub", "deep"), 0o755)
	big := testkit.RandomBytes(t, 1536<<10) // 1.5 MiB
	os.WriteFile(filepath.Join(tree, "small"), []byte("hello\n"), 0o644)
	os.WriteFile(filepath.Join(tree, "sub", "deep", "big"), big, 0o600)
	os.Symlink("small", filepath.Join(tree, "link"))

	// put -r into a new name, and into an existing directory.
	out := c.MustRun("put", "-r", tree, "/t")
	if strings.Contains(out, "%") || strings.Contains(out, "\r") {
		t.Errorf("put -r with stderr not a terminal printed a progress bar:\n%q", out)
	}
	c.MustRun("mkdir", "/into")
	c.MustRun("put", "-r", tree, "/into")
	c.MustRun("stat", "/into/tree/sub/deep/big")

	// ls -R names every directory and its entries.
	out = c.MustRun("ls", "-R", "/t")
	for _, want := range []string{"/t:\n", "/t/sub:\n", "/t/sub/deep:\n", "big\n", "small\n", "link\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("ls -R /t lacks %q:\n%s", want, out)
		}
	}
	// ls -lh: human-readable sizes; -help is still the help.
	out = c.MustRun("ls", "-lh", "/t/sub/deep")
	if !regexp.MustCompile(`\s1\.5M\s.*big\n`).MatchString(out) {
		t.Errorf("ls -lh shows no 1.5M for a 1.5 MiB file:\n%s", out)
	}
	if out := c.MustRun("ls", "-help"); !strings.Contains(out, "usage: plasma ls") {
		t.Errorf("ls -help:\n%s", out)
	}

	// du: every directory's total, children first; -s one total; -h.
	out = c.MustRun("du", "/t")
	wantDu := "1572864\t/t/sub/deep\n1572864\t/t/sub\n1572870\t/t\n"
	if out != wantDu {
		t.Errorf("du /t:\n%s\nwant:\n%s", out, wantDu)
	}
	if out := c.MustRun("du", "-s", "/t", "/into"); out != "1572870\t/t\n1572870\t/into\n" {
		t.Errorf("du -s /t /into:\n%s", out)
	}
	if out := c.MustRun("du", "-sh", "/t/sub"); out != "1.5M\t/t/sub\n" {
		t.Errorf("du -sh /t/sub: %q", out)
	}

	// df: capacity (2 volumes of 16 MiB), used and free.
	out = c.MustRun("df")
	if !regexp.MustCompile(`(?m)^plasmafs\s+33554432\s+\d+\s+\d+\s+\d+%\s+2 \(2 alive\)$`).MatchString(out) {
		t.Errorf("df:\n%s", out)
	}
	if out := c.MustRun("df", "-h"); !regexp.MustCompile(`(?m)^plasmafs\s+32M\s`).MatchString(out) {
		t.Errorf("df -h:\n%s", out)
	}

	// get -r brings the tree back as it was put.
	back := filepath.Join(tmp, "back")
	c.MustRun("get", "-r", "/t", back)
	if b, _ := os.ReadFile(filepath.Join(back, "sub", "deep", "big")); !bytes.Equal(b, big) {
		t.Errorf("get -r: big reads back %d bytes, not the %d put", len(b), len(big))
	}
	if b, _ := os.ReadFile(filepath.Join(back, "small")); string(b) != "hello\n" {
		t.Errorf("get -r: small reads back %q", b)
	}
	if l, err := os.Readlink(filepath.Join(back, "link")); err != nil || l != "small" {
		t.Errorf("get -r: link is %q (%v), want a symbolic link to small", l, err)
	}

	// On a terminal, put -r shows a progress bar (script(1) gives the
	// command a pseudo-terminal).
	script := exec.Command("script", "-qec", strings.Join([]string{c.Bin, "put", "-r", tree, "/tty"}, " "), "/dev/null")
	script.Env = c.Env()
	tty, err := script.CombinedOutput()
	if err != nil {
		t.Fatalf("put -r on a terminal: %v:\n%s", err, tty)
	}
	if !strings.Contains(string(tty), "100%") {
		t.Errorf("put -r on a terminal shows no progress bar:\n%q", tty)
	}

	// setrep: a file, then a tree with -R; the metadata changes, and the
	// namenode copies the existing blocks (issue 23): fsck is clean once it
	// has (before, it reports them under-replicated).
	c.MustRun("put", "-rep", "1", filepath.Join(tree, "small"), "/one")
	if out := c.MustRun("setrep", "2", "/one"); !strings.Contains(out, "Replication 2 set: /one") {
		t.Errorf("setrep 2 /one:\n%s", out)
	}
	if out := c.MustRun("stat", "/one"); !strings.Contains(out, "rep: 2") {
		t.Errorf("stat after setrep 2:\n%s", out)
	}
	for deadline := time.Now().Add(60 * time.Second); ; {
		out, code := c.Run(nil, "fsck")
		if code == 0 {
			break
		}
		if code != 1 || !strings.Contains(out, "/one: blocks 0-0 have 1 of 2 replicas") || time.Now().After(deadline) {
			t.Fatalf("fsck after raising the replication of /one: exit %d:\n%s", code, out)
		}
		time.Sleep(100 * time.Millisecond) // polling a condition, not timing the test
	}
	if out, code := c.Run(nil, "setrep", "1", "/t"); code != 1 || !strings.Contains(out, "-R") {
		t.Errorf("setrep on a directory without -R: exit %d:\n%s", code, out)
	}
	c.MustRun("setrep", "-R", "1", "/t")
	for _, p := range []string{"/t/small", "/t/sub/deep/big"} {
		if out := c.MustRun("stat", p); !strings.Contains(out, "rep: 1") {
			t.Errorf("stat %s after setrep -R 1:\n%s", p, out)
		}
	}
}
