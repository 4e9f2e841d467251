package mr

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestMRCombiner: a word count whose combiner sums counts per word in each
// map task's sorted runs (spills included: the sort buffer is small) gives
// exactly the counts of the input, computed here, with fewer records
// after the combiner than before it.
func TestMRCombiner(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	files := map[string][]byte{"a.txt": testkit.MRText(11, 4000), "b.txt": testkit.MRText(12, 2000)}
	testkit.MRPut(t, c, "/in", files)
	want := wordCounts(files)
	// The combiner prints its sums in awk's hash order (the map task sorts
	// them again); the reducer sums runs of equal keys, so it needs its
	// input sorted by key, and any disorder shows as a word twice.
	combine := `awk -F'\t' '{s[$1] += $2} END {for (k in s) print k "\t" s[k]}'`
	reduce := `awk -F'\t' '$1 != k {if (NR > 1) print k "\t" s; k = $1; s = 0} {s += $2} END {if (NR > 0) print k "\t" s}'`
	out, code := mrRun(t, c, "-input", "/in", "-output", "/out", "-work", "/work", "-log", "/log",
		"-map", testkit.MRWordMapper, "-combine", combine, "-reduce", reduce, "-partitions", "2", "-split-size", "64K", "-sort-buffer", "64K")
	if code != 0 {
		t.Fatalf("mr run: exit %d:\n%s", code, out)
	}
	got := mrOutput(t, c, "/out", 2, nil)
	sort.Strings(got)
	testkit.SameLines(t, got, want)
	in, _ := strconv.Atoi(testkit.ReportValue(t, out, "Combine input records"))
	outRecs, _ := strconv.Atoi(testkit.ReportValue(t, out, "Combine output records"))
	if spills, _ := strconv.Atoi(testkit.ReportValue(t, out, "Spills")); spills == 0 {
		t.Fatalf("no spills: the combiner ran only on final runs\n%s", out)
	}
	if in == 0 || outRecs >= in {
		t.Fatalf("combiner records in %d, out %d: it did not combine\n%s", in, outRecs, out)
	}
}

// wordCounts is the reference of the word count tests: "word TAB count"
// for every word of the files, sorted.
func wordCounts(files map[string][]byte) []string {
	counts := map[string]int{}
	for _, d := range files {
		for _, w := range strings.Fields(string(d)) {
			counts[w]++
		}
	}
	var want []string
	for w, n := range counts {
		want = append(want, fmt.Sprintf("%s\t%d", w, n))
	}
	sort.Strings(want)
	return want
}
