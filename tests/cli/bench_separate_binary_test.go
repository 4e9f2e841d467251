package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/plasmafs/plasma/internal/clustertest"
)

// TestBenchSeparateBinary (issue 20 item 4): the benchmarks are their own
// command. The plasma binary links none of their code (checked by its
// symbols: bbolt, once a reference only, is now the Raft log's store);
// plasma-bench lists and runs them; 'plasma bench …' runs plasma-bench when
// it is beside plasma, and without it says in one line where the
// benchmarks went (exit 1, no stack trace).
func TestBenchSeparateBinary(t *testing.T) {
	plasma, benchBin := clustertest.Binary(t), clustertest.BenchBinary(t)
	const benchPkgs = "github.com/plasmafs/plasma/internal/bench"
	for bin, want := range map[string]bool{plasma: false, benchBin: true} {
		syms, err := exec.Command("go", "tool", "nm", bin).Output()
		if err != nil {
			t.Fatalf("go tool nm %s: %v", bin, err)
		}
		if got := strings.Contains(string(syms), benchPkgs); got != want {
			t.Errorf("%s links the benchmarks' packages (%s…): %v, want %v", bin, benchPkgs, got, want)
		}
	}

	out, err := exec.Command(benchBin, "help").Output()
	if err != nil || !strings.Contains(string(out), "  metarates ") || !strings.Contains(string(out), "usage: plasma-bench") {
		t.Fatalf("plasma-bench help: %v\n%s", err, out)
	}
	// A benchmark runs through plasma-bench, with its own error handling.
	if o, e, code := runBench(t, benchBin, "seq", "-runs", "x"); code != 2 || !strings.Contains(e, "plasma-bench seq: ") || !strings.Contains(e, "usage: plasma-bench seq") {
		t.Errorf("plasma-bench seq -runs x: exit %d, stdout %q, stderr %q", code, o, e)
	}
	if o, e, code := runBench(t, benchBin, "warm-memory", "-size", "1M"); code != 0 || !strings.Contains(o, "touched 1.0 MiB") {
		t.Errorf("plasma-bench warm-memory: exit %d, stdout %q, stderr %q", code, o, e)
	}

	// plasma forwards to the plasma-bench beside it…
	if o, e, code := runPlasma(t, nil, 20*time.Second, "bench", "warm-memory", "-size", "64K"); code != 0 || !strings.Contains(o, "touched 64.0 KiB") {
		t.Errorf("plasma bench warm-memory: exit %d, stdout %q, stderr %q", code, o, e)
	}
	// …and without one (a copy of plasma alone, an empty PATH) names it.
	alone := filepath.Join(t.TempDir(), "plasma")
	b, err := os.ReadFile(plasma)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(alone, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(alone, "bench", "seq")
	cmd.Env = append(cleanEnv(t), "PATH=")
	eb, _ := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); code != 1 || !strings.Contains(string(eb), "plasma-bench") || strings.Count(strings.TrimSpace(string(eb)), "\n") != 0 {
		t.Errorf("plasma bench without plasma-bench: exit %d, output %q", code, eb)
	}
}

// runBench runs plasma-bench with args in a clean environment.
func runBench(t *testing.T, bin string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = cleanEnv(t)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			t.Fatalf("plasma-bench %q: %v", args, err)
		}
	}
	return out.String(), errb.String(), cmd.ProcessState.ExitCode()
}
