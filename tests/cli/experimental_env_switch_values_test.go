package cli

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/plasmafs/plasma/internal/clustertest"
)

// TestExperimentalEnvSwitchValues: $PLASMAFS_JOURNAL_SMALL_WRITES and
// $PLASMAFS_DEFER_DATA_SYNC take 1 (on) or 0 (off); any other value
// (true, yes) is refused naming the variable, where it used to leave
// the switch off silently while its user believed it on.
func TestExperimentalEnvSwitchValues(t *testing.T) {
	bin := clustertest.Binary(t)
	for _, env := range []string{"PLASMAFS_JOURNAL_SMALL_WRITES=yes", "PLASMAFS_DEFER_DATA_SYNC=true"} {
		cmd := exec.Command(bin, "ls", "-namenode", clustertest.FreeAddr(t), "/")
		cmd.Env = append(os.Environ(), env)
		out, err := cmd.CombinedOutput()
		name, _, _ := strings.Cut(env, "=")
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(out), "$"+name) || !strings.Contains(string(out), "set it to 1") {
			t.Errorf("%s plasma ls: %v, want exit 1 naming $%s and its values:\n%s", env, err, name, out)
		}
	}
	// 0 and 1 are taken: the command gets as far as the namenode.
	for _, env := range []string{"PLASMAFS_JOURNAL_SMALL_WRITES=1", "PLASMAFS_DEFER_DATA_SYNC=0"} {
		cmd := exec.Command(bin, "ls", "-namenode", clustertest.FreeAddr(t), "/")
		cmd.Env = append(os.Environ(), env)
		out, _ := cmd.CombinedOutput()
		if strings.Contains(string(out), "set it to 1") {
			t.Errorf("%s plasma ls refused the value:\n%s", env, out)
		}
	}
}
