package bench

import (
	"context"
	"os/exec"
	"strings"
	"testing"
)

// TestBuildTwoLocalDirs: the generated project builds with make and cc in
// two local directories, both build the same program, and the report
// sets every step beside the reference.
func TestBuildTwoLocalDirs(t *testing.T) {
	for _, tool := range []string{"make", "cc"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("no %s: make test installs it", tool)
		}
	}
	ours, ref := t.TempDir(), t.TempDir()
	rep, err := Build(context.Background(), BuildOptions{Target: ours, Refs: []string{ref}, Files: 3, Jobs: 2, Runs: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != len(buildPhases) {
		t.Fatalf("%d results, want one per step (%d): %+v", len(rep.Results), len(buildPhases), rep.Results)
	}
	for _, r := range rep.Results {
		if r.Ours <= 0 || r.Ref <= 0 || r.Ratio <= 0 || !strings.Contains(r.RefName, ref) || r.Unit != "ms" {
			t.Errorf("result %+v", r)
		}
	}
	if !strings.Contains(rep.Results[1].Name, "make -j2 all") {
		t.Errorf("second step is %q", rep.Results[1].Name)
	}
}

func TestBeside(t *testing.T) {
	ours := &Report{Bench: "x", Params: "p", Results: []Result{
		{Name: "a", Unit: "ops/s", Ours: 10}, {Name: "b", Unit: "ops/s", Ours: 4}, {Name: "only ours", Unit: "ops/s", Ours: 1},
	}}
	r1 := &Report{Results: []Result{{Name: "a", Unit: "ops/s", Ours: 20}, {Name: "b", Unit: "ops/s", Ours: 2}}}
	r2 := &Report{Results: []Result{{Name: "a", Unit: "ops/s", Ours: 40}}}
	got := Beside(ours, "T", Reference{"R1", r1}, Reference{"R2", r2})
	want := []struct {
		name, ref string
		ratio     float64
	}{{"a", "R1", 0.5}, {"a", "R2", 0.25}, {"b", "R1", 2}, {"only ours", "T", 0}}
	if len(got.Results) != len(want) {
		t.Fatalf("results %+v", got.Results)
	}
	for i, w := range want {
		r := got.Results[i]
		if r.Name != w.name || r.RefName != w.ref || r.Ratio != w.ratio {
			t.Errorf("result %d: %+v, want %+v", i, r, w)
		}
	}
	if !strings.Contains(got.Params, "ours: T") || !strings.Contains(got.Params, "references: R1; R2") {
		t.Errorf("params %q", got.Params)
	}
}

func TestDescribeDir(t *testing.T) {
	d := t.TempDir()
	got := DescribeDir(d)
	if !strings.HasSuffix(got, ", "+d) || strings.HasPrefix(got, d) {
		t.Errorf("DescribeDir(%s) = %q: want the filesystem type, then the path", d, got)
	}
}
