package webhdfs

import (
	"net/url"
	"os/exec"
	"testing"

	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestWebHDFSPythonClients runs real Python WebHDFS clients against the
// gateway (testdata/webhdfs_clients.py): fsspec's WebHDFS file system and
// the hdfs package list, write, read whole files and ranges, append,
// rename and delete, and a permission refusal raises PermissionError
// (fsspec) and HdfsError for AccessControlException (hdfs), a missing
// file FileNotFoundError. What fsspec wrote is what PlasmaFS holds.
func TestWebHDFSPythonClients(t *testing.T) {
	needPythonPackages(t, "fsspec", "hdfs", "requests")
	c := clustertest.Start(t, clustertest.Options{})
	c.MustRun("mkdir", "/work", "/admin-dir")
	c.MustRun("chown", "alice:alice", "/work")
	testkit.PutOwned(t, c, "/secret", "admin's\n", "", "600")
	g := startWebHDFS(t, c)
	pu, err := url.Parse(g.URL)
	testkit.MustOK(t, "gateway URL", err)
	cmd := exec.Command("python3", "testdata/webhdfs_clients.py", pu.Hostname(), pu.Port())
	out, err := cmd.CombinedOutput()
	if err != nil || string(out) != "OK\n" {
		t.Fatalf("python WebHDFS clients: %v\n%s", err, out)
	}
	if got := c.MustRun("cat", "/work/py/keep.bin"); got != "kept by fsspec\n" {
		t.Errorf("the file fsspec wrote holds %q", got)
	}
	if got := testkit.PlasmaOwner(t, c, "/work/py/keep.bin"); got != "alice:alice" {
		t.Errorf("the file fsspec wrote as alice belongs to %s", got)
	}
}

// needPythonPackages installs the Python packages the test needs with
// pip when they are missing (make deps does it for CI).
func needPythonPackages(t *testing.T, pkgs ...string) {
	t.Helper()
	imports := ""
	for i, p := range pkgs {
		if i > 0 {
			imports += ", "
		}
		imports += p
	}
	if exec.Command("python3", "-c", "import "+imports).Run() == nil {
		return
	}
	out, err := exec.Command("python3", append([]string{"-m", "pip", "install", "-q"}, pkgs...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("pip install %v (needed by this test; make deps installs them): %v\n%s", pkgs, err, out)
	}
}
