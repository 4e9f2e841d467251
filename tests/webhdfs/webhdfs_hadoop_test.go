package webhdfs

import (
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// hadoopArtifacts are the Maven artifacts of Hadoop's shaded client and
// what it needs to run FsShell (`hadoop fs`).
var hadoopArtifacts = []string{
	"org.apache.hadoop:hadoop-client-api:3.3.6",
	"org.apache.hadoop:hadoop-client-runtime:3.3.6",
	"org.slf4j:slf4j-api:1.7.36",
	"org.slf4j:slf4j-nop:1.7.36",
	"commons-logging:commons-logging:1.2",
}

// TestWebHDFSHadoopClient runs Hadoop's own webhdfs:// file system
// (hadoop-client 3.3.6 from Maven Central, through FsShell: what `hadoop
// fs` and Spark use) against the gateway: put, cat, mkdir -p, mv,
// appendToFile, ls -R, checksum (HDFS's MD5-of-MD5-of-CRC32C, parsed by
// Hadoop), rm -r (which asks GETSERVERDEFAULTS for the trash interval),
// and a permission refusal that Hadoop reports as one.
func TestWebHDFSHadoopClient(t *testing.T) {
	cp := hadoopClasspath(t)
	c := clustertest.Start(t, clustertest.Options{})
	c.MustRun("mkdir", "/hd")
	c.MustRun("chown", "alice:alice", "/hd")
	testkit.PutOwned(t, c, "/secret", "root's\n", "", "600")
	g := startWebHDFS(t, c)
	pu, err := url.Parse(g.URL)
	testkit.MustOK(t, "gateway URL", err)
	fsURL := "webhdfs://" + pu.Host
	hadoop := func(user string, args ...string) (string, error) {
		t.Helper()
		cmd := exec.Command("java", append([]string{"-cp", cp, "org.apache.hadoop.fs.FsShell"}, args...)...)
		cmd.Env = append(os.Environ(), "HADOOP_USER_NAME="+user)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	must := func(args ...string) string {
		t.Helper()
		out, err := hadoop("alice", args...)
		if err != nil {
			t.Fatalf("hadoop fs %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	dir := t.TempDir()
	data := testkit.SeededBytes(200<<10+7, 11)
	more := []byte("appended by hadoop fs\n")
	local, local2 := filepath.Join(dir, "data.bin"), filepath.Join(dir, "more")
	testkit.MustOK(t, "write", os.WriteFile(local, data, 0o644))
	testkit.MustOK(t, "write", os.WriteFile(local2, more, 0o644))

	must("-put", local, fsURL+"/hd/data.bin")
	if got := c.MustRun("cat", "/hd/data.bin"); got != string(data) {
		t.Fatalf("plasma cat of what hadoop fs -put wrote: %d bytes, want %d", len(got), len(data))
	}
	if got := testkit.PlasmaOwner(t, c, "/hd/data.bin"); got != "alice:alice" {
		t.Errorf("hadoop fs -put as alice made a file of %s", got)
	}
	if got := must("-cat", fsURL+"/hd/data.bin"); got != string(data) {
		t.Errorf("hadoop fs -cat: %d bytes, want %d", len(got), len(data))
	}
	must("-mkdir", "-p", fsURL+"/hd/x/y")
	must("-mv", fsURL+"/hd/data.bin", fsURL+"/hd/x/")
	must("-appendToFile", local2, fsURL+"/hd/x/data.bin")
	whole := append(append([]byte(nil), data...), more...)
	if got := c.MustRun("cat", "/hd/x/data.bin"); got != string(whole) {
		t.Fatalf("after -mv and -appendToFile PlasmaFS holds %d bytes, want %d", len(got), len(whole))
	}
	if ls := must("-ls", "-R", fsURL+"/hd"); !strings.Contains(ls, "/hd/x/data.bin") || !strings.Contains(ls, "/hd/x/y") ||
		!strings.Contains(ls, " "+strconv.Itoa(len(whole))+" ") {
		t.Errorf("hadoop fs -ls -R:\n%s", ls)
	}
	alg, sum := md5md5crc32c(whole, 64<<10)
	if got := must("-checksum", fsURL+"/hd/x/data.bin"); !strings.Contains(got, alg+"\t"+sum) {
		t.Errorf("hadoop fs -checksum: %q, want %s %s", got, alg, sum)
	}
	if out, err := hadoop("alice", "-put", local, fsURL+"/hd/x/data.bin"); err == nil || !strings.Contains(out, "File exists") {
		t.Errorf("hadoop fs -put onto an existing file without -f: %v\n%s", err, out)
	}
	if out, err := hadoop("alice", "-cat", fsURL+"/secret"); err == nil || !strings.Contains(out, "Permission denied") {
		t.Errorf("hadoop fs -cat of root's 0600 file as alice: %v\n%s", err, out)
	}
	must("-rm", "-r", fsURL+"/hd/x")
	if plasmaExists(t, c, "/hd/x") {
		t.Error("hadoop fs -rm -r left the directory")
	}
}

// hadoopClasspath returns the classpath of Hadoop's client, fetching the
// jars from Maven Central with mvn when they are missing (make deps
// installs java and maven), and a configuration directory Hadoop needs.
func hadoopClasspath(t *testing.T) string {
	t.Helper()
	for _, tool := range []string{"java", "mvn"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("this test needs %s (make deps installs it): %v", tool, err)
		}
	}
	home, err := os.UserHomeDir()
	testkit.MustOK(t, "home", err)
	conf := t.TempDir()
	testkit.MustOK(t, "core-site.xml", os.WriteFile(filepath.Join(conf, "core-site.xml"), []byte("<?xml version=\"1.0\"?>\n<configuration></configuration>\n"), 0o644))
	cp := []string{conf}
	for _, a := range hadoopArtifacts {
		p := strings.Split(a, ":")
		jar := filepath.Join(append([]string{home, ".m2", "repository"}, append(strings.Split(p[0], "."), p[1], p[2], p[1]+"-"+p[2]+".jar")...)...)
		if _, err := os.Stat(jar); err != nil {
			out, err := exec.Command("mvn", "-q", "-B", "dependency:get", "-Dartifact="+a, "-Dtransitive=false").CombinedOutput()
			if err != nil {
				t.Fatalf("mvn dependency:get %s: %v\n%s", a, err, out)
			}
		}
		cp = append(cp, jar)
	}
	return strings.Join(cp, string(os.PathListSeparator))
}
