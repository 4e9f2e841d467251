package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestCLIErrorsSayWhatHappened (issue 19 item 13): what used to fail with a
// misleading error does what is meant, or says what is wrong and what to
// do: put into a directory puts the file inside it; cp to a local path
// says that cp copies within PlasmaFS and names 'plasma get'; a file larger
// than the cluster says that the cluster is out of space (not that an
// empty user name passed a per-user limit); a refused connection says that
// no namenode listens there and how to start one; 'mr run' without -work
// uses a work directory beside its output.
func TestCLIErrorsSayWhatHappened(t *testing.T) {
	// One datanode of 1 MiB (16 blocks), security none as 'cluster up
	// -security none' runs it.
	c := clustertest.Start(t, clustertest.Options{Datanodes: 1, Size: 1 << 20, Security: "none", DataSecurity: "none"})
	tmp := t.TempDir()
	local := filepath.Join(tmp, "report.txt")
	data := testkit.RandomBytes(t, 100<<10)
	os.WriteFile(local, data, 0o644)

	// put into an existing directory.
	c.MustRun("mkdir", "/d")
	c.MustRun("put", "-q", local, "/d")
	got := filepath.Join(tmp, "got")
	c.MustRun("get", "-q", "/d/report.txt", got)
	if b, _ := os.ReadFile(got); !bytes.Equal(b, data) {
		t.Fatalf("put into a directory: /d/report.txt reads back %d bytes, not the %d put", len(b), len(data))
	}
	// cp into an existing directory, too.
	c.MustRun("mkdir", "/e")
	c.MustRun("cp", "-q", "/d/report.txt", "/e")
	c.MustRun("stat", "/e/report.txt")

	// cp to a local path.
	out, code := c.Run(nil, "cp", "-q", "/d/report.txt", filepath.Join(tmp, "copy"))
	if code != 1 || !strings.Contains(out, "plasma get") || !strings.Contains(out, "within PlasmaFS") {
		t.Errorf("cp to a local path: exit %d, want 1 and a message naming 'plasma get':\n%s", code, out)
	}
	// cp from a local path.
	out, code = c.Run(nil, "cp", "-q", local, "/x")
	if code != 1 || !strings.Contains(out, "plasma put") {
		t.Errorf("cp from a local path: exit %d, want 1 and a message naming 'plasma put':\n%s", code, out)
	}

	// A file larger than the cluster.
	big := filepath.Join(tmp, "big")
	os.WriteFile(big, testkit.RandomBytes(t, 3<<20), 0o644)
	out, code = c.Run(nil, "put", "-q", big, "/big")
	if code != 1 || !strings.Contains(out, "cluster is out of space") || !strings.Contains(out, "free") || strings.Contains(out, `user ""`) {
		t.Errorf("put of a file larger than the cluster: exit %d, want 1 and 'the cluster is out of space' with the free blocks:\n%s", code, out)
	}

	// No namenode at the configured address.
	dead := clustertest.FreeAddr(t)
	out, code = c.RunEnv([]string{"PLASMAFS_NAMENODES=" + dead}, nil, "ls", "/")
	if code != 1 || !strings.Contains(out, "connection refused") || !strings.Contains(out, "no namenode listens at "+dead) || !strings.Contains(out, "plasma cluster up") {
		t.Errorf("ls with no namenode at %s: exit %d, want 1 and a hint to start the cluster:\n%s", dead, code, out)
	}

	// mr run without -work.
	c.MustRun("mkdir", "-p", "/in", "/jobs")
	c.MustRun("put", "-q", local, "/in/part")
	out, code = c.Run(nil, "mr", "run", "-local", "-q", "-input", "/in", "-output", "/jobs/out", "-map", "wc -c", "-partitions", "1")
	if code != 0 {
		t.Fatalf("mr run without -work: exit %d:\n%s", code, out)
	}
	c.MustRun("stat", "/jobs/out/part-00000", "/jobs/.plasma-mr-work")
}
