package webhdfs

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestWebHDFSSpark runs PySpark (local mode, with the Hadoop client it
// bundles) on a Plasma cluster's data through the gateway: it reads a CSV
// file, writes Parquet (Spark's output committer: temporary directories,
// renames, deletes, _SUCCESS) and reads it back. Spark asks
// GETFILEBLOCKLOCATIONS to split its input, and its Hadoop client cannot
// read JSON answers that carry a Content-Type.
func TestWebHDFSSpark(t *testing.T) {
	needPythonPackages(t, "pyspark")
	c := clustertest.Start(t, clustertest.Options{})
	c.MustRun("mkdir", "/spark")
	c.MustRun("chown", "alice:alice", "/spark")
	g := startWebHDFS(t, c)
	if out, code := c.RunEnv(nil, []byte("name,n\na,1\nb,2\nc,3\n"), "put", "-stdin", "/spark/in.csv"); code != 0 {
		t.Fatalf("put: %s", out)
	}
	cmd := exec.Command("python3", "testdata/webhdfs_spark.py", strings.Replace(g.URL, "http://", "webhdfs://", 1))
	cmd.Env = append(os.Environ(), "HADOOP_USER_NAME=alice")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "rows 3 sum 6\n") || !strings.HasSuffix(string(out), "OK\n") {
		t.Fatalf("PySpark through the gateway: %v\n%s", err, out)
	}
	if !plasmaExists(t, c, "/spark/out.parquet/_SUCCESS") {
		t.Errorf("Spark's Parquet output has no _SUCCESS:\n%s", c.MustRun("ls", "/spark/out.parquet"))
	}
	if got := testkit.PlasmaOwner(t, c, "/spark/out.parquet"); got != "alice:alice" {
		t.Errorf("Spark's output (as alice) belongs to %s", got)
	}
}
