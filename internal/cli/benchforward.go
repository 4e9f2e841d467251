package cli

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
)

func init() {
	register("bench", "BENCHMARK [options]", "the seed benchmarks: runs plasma-bench (built beside plasma by make build)", cmdBenchForward)
}

// cmdBenchForward runs plasma-bench in this process's place: the
// benchmarks, with their references (bbolt, SQLite, PySpark, the loopback
// filesystem), are not part of the plasma binary operators deploy, but
// 'plasma bench …' keeps working where plasma-bench is installed beside
// plasma or on the PATH.
func cmdBenchForward(ctx context.Context, args []string) error {
	exe, err := benchBinary()
	if err != nil {
		return err
	}
	return syscall.Exec(exe, append([]string{exe}, args...), os.Environ())
}

// benchBinary finds plasma-bench: beside this executable, else on the PATH.
func benchBinary() (string, error) {
	if self, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(self), "plasma-bench")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	p, err := exec.LookPath("plasma-bench")
	if err != nil {
		return "", errors.New("the benchmarks are in the plasma-bench command, which is neither beside this plasma nor on the PATH (make build builds bin/plasma-bench)")
	}
	return p, nil
}
