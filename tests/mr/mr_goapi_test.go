package mr

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestMRGoAPI: a word count written as Go functions (map, combine, reduce
// and a partitioner by first letter), built here into one executable that
// submits the job and serves as its tasks, gives exactly the counts of the
// input computed here, each word in the partition its first letter picks,
// and its map tasks combine their output before handing it on.
func TestMRGoAPI(t *testing.T) {
	exe := filepath.Join(t.TempDir(), "gowc")
	build := exec.Command("go", "build", "-o", exe, "./testdata/gowc")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build of the job: %v\n%s", err, out)
	}
	c := clustertest.Start(t, clustertest.Options{})
	files := map[string][]byte{"a.txt": testkit.MRText(21, 3000), "b.txt": testkit.MRText(22, 1500)}
	testkit.MRPut(t, c, "/in", files)
	want := wordCounts(files)

	cmd := exec.Command(exe, "-input", "/in", "-output", "/out", "-partitions", "3", "-split-size", "65536", "-sort-buffer", "65536")
	cmd.Env = c.Env()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the Go job: %v\n%s", err, out)
	}
	if testkit.ReportValue(t, string(out), "Map tasks") == "1" {
		t.Fatalf("one map task: the input was not split\n%s", out)
	}
	// The map tasks combine in their own process (a 32 KiB table here): fewer records
	// reach the task runner than the input has words.
	words := 0
	for _, b := range files {
		words += len(strings.Fields(string(b)))
	}
	if n, err := strconv.Atoi(testkit.ReportValue(t, string(out), "Map output records")); err != nil || n >= words*3/4 {
		t.Fatalf("map output records %d (%v) of %d words: not combined in the map tasks\n%s", n, err, words, out)
	}
	got := mrOutput(t, c, "/out", 3, nil)
	sort.Strings(got)
	testkit.SameLines(t, got, want)
	// Each word is in the partition of its first byte.
	for p := 0; p < 3; p++ {
		for _, line := range strings.Split(c.MustRun("cat", fmt.Sprintf("/out/part-%05d", p)), "\n") {
			if line != "" && int(line[0])%3 != p {
				t.Fatalf("%q in partition %d: the job's partitioner was not used", line, p)
			}
		}
	}
}
