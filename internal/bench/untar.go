package bench

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// UntarOptions configures Untar.
type UntarOptions struct {
	Dir     string // where the tree is extracted (a directory of a mount, or a reference)
	Tarball string // made by MakeTarball
	Files   int    // files and directories in it (for the rate)
	Runs    int    // extractions (each followed by rm -rf); the fastest is reported
}

// MakeTarball packs the tree src into a tarball in a new temporary
// directory and returns its path, how many entries it holds, and a
// function that removes it.
func MakeTarball(src string) (string, int, func(), error) {
	src = filepath.Clean(src)
	n := 0
	if err := filepath.WalkDir(src, func(_ string, _ fs.DirEntry, err error) error {
		n++
		return err
	}); err != nil {
		return "", 0, nil, fmt.Errorf("walk %s: %w", src, err)
	}
	dir, err := os.MkdirTemp("", "plasma-bench-untar")
	if err != nil {
		return "", 0, nil, err
	}
	done := func() { os.RemoveAll(dir) }
	tarball := filepath.Join(dir, "tree.tar")
	if out, err := exec.Command("tar", "-C", filepath.Dir(src), "-cf", tarball, filepath.Base(src)).CombinedOutput(); err != nil {
		done()
		return "", 0, nil, fmt.Errorf("tar -c %s: %v: %s", src, err, out)
	}
	return tarball, n, done, nil
}

// Untar extracts the tarball into Dir with tar x, then removes the tree
// with rm -rf, Runs times, and reports the fastest of each as entries per
// second. Nothing is fsynced: what a user's tar x and rm -rf do.
func Untar(o UntarOptions) (*Report, error) {
	if o.Runs < 1 {
		o.Runs = 1
	}
	rep := &Report{Bench: "untar", Started: time.Now(), Params: fmt.Sprintf("entries=%d runs=%d (fastest reported) dir=%s", o.Files, o.Runs, o.Dir)}
	var bestX, bestRm time.Duration
	for i := 0; i < o.Runs; i++ {
		dest := filepath.Join(o.Dir, fmt.Sprintf("plasma-bench-untar-%d", i))
		if err := os.MkdirAll(dest, 0o755); err != nil {
			return nil, err
		}
		start := time.Now()
		if out, err := exec.Command("tar", "--no-same-owner", "-xf", o.Tarball, "-C", dest).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("tar -x into %s: %v: %s", dest, err, lastLines(out))
		}
		x := time.Since(start)
		start = time.Now()
		if out, err := exec.Command("rm", "-rf", dest).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("rm -rf %s: %v: %s", dest, err, lastLines(out))
		}
		rm := time.Since(start)
		if bestX == 0 || x < bestX {
			bestX = x
		}
		if bestRm == 0 || rm < bestRm {
			bestRm = rm
		}
	}
	rep.add(Result{Name: "tar x of a source tree", Unit: "entries/s", Ours: float64(o.Files) / bestX.Seconds(),
		Note: fmt.Sprintf("%.2f s", bestX.Seconds())})
	rep.add(Result{Name: "rm -rf of it", Unit: "entries/s", Ours: float64(o.Files) / bestRm.Seconds(),
		Note: fmt.Sprintf("%.2f s", bestRm.Seconds())})
	return rep, nil
}

// lastLines is the end of a command's output, for an error message.
func lastLines(out []byte) string {
	const keep = 1000
	if len(out) > keep {
		return "..." + string(out[len(out)-keep:])
	}
	return string(out)
}
