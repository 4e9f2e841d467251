package cli

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/plasmafs/plasma/internal/clustertest"
)

// TestDatanodeInitBadInput: 'plasma datanode init' refuses (exit 2,
// nothing created) what it used to ignore silently: an extra argument, a
// second directory, -fallocate with an explicit -layout sparse (it made
// a fixed volume), and -slot-bytes for a fixed volume.
func TestDatanodeInitBadInput(t *testing.T) {
	bin := clustertest.Binary(t)
	dir := t.TempDir()
	vol := filepath.Join(dir, "vol")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-dir", vol, "-size", "1M", "extra"}, `unexpected argument "extra"`},
		{[]string{vol, filepath.Join(dir, "vol2"), "-size", "1M"}, "unexpected argument"},
		{[]string{"-dir", vol, "-size", "1M", "-layout", "sparse", "-fallocate"}, "-layout fixed"},
		{[]string{"-dir", vol, "-size", "1M", "-blocksize", "64K", "-layout", "fixed", "-slot-bytes", "8K"}, "-slot-bytes is for sparse volumes"},
		{[]string{"-dir", vol, "-size", "1M", "-blocksize", "64K", "-fallocate", "-slot-bytes", "8K"}, "-slot-bytes is for sparse volumes"},
	} {
		args := append([]string{"datanode", "init"}, tc.args...)
		out, err := exec.Command(bin, args...).CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), tc.want) {
			t.Errorf("plasma %s: %v, want exit 2 and %q:\n%s", strings.Join(args, " "), err, tc.want, out)
		}
		if _, err := os.Stat(vol); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("plasma %s was refused but made %s (stat: %v)", strings.Join(args, " "), vol, err)
			os.RemoveAll(vol)
		}
	}
	// The documented forms still work: a sparse volume with -slot-bytes,
	// a fixed one with -fallocate, the directory as the only argument.
	for i, args := range [][]string{
		{"-dir", filepath.Join(dir, "a"), "-size", "1M", "-blocksize", "64K", "-slot-bytes", "8K"},
		{"-dir", filepath.Join(dir, "b"), "-size", "1M", "-layout", "fixed", "-fallocate"},
		{filepath.Join(dir, "c"), "-size", "1M"},
	} {
		if out, err := exec.Command(bin, append([]string{"datanode", "init"}, args...)...).CombinedOutput(); err != nil {
			t.Errorf("case %d: plasma datanode init %s: %v\n%s", i, strings.Join(args, " "), err, out)
		}
	}
}
