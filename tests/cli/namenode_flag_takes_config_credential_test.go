package cli

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/plasmafs/plasma/internal/clustertest"
)

// TestNamenodeFlagTakesConfigCredential: 'plasma ls -namenode ADDR /' (as
// README shows for a namenode group) and $PLASMAFS_NAMENODES take the
// security levels and credential of the configuration file's entry that
// lists those namenodes; on a cluster at level privacy they used to fail
// with "needs a credential: set credential in FILE" while FILE had it. A
// list no entry names fails saying so.
func TestNamenodeFlagTakesConfigCredential(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Datanodes: 1, Size: 16 << 20})
	conf := filepath.Join(t.TempDir(), "plasmafs")
	os.WriteFile(conf, []byte(fmt.Sprintf(`plasmafs {
  cluster {
    clustername = "other";
    node { addr = "127.0.0.1:1"; };
  };
  cluster {
    clustername = "%s";
    security = "%s";
    data_security = "%s";
    credential = "%s";
    node { addr = "%s"; };
  };
}
`, c.Opts.Cluster, c.Opts.Security, c.Opts.DataSecurity, c.AdminCred, c.NN.Addr)), 0o600)
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "PLASMAFS_") {
			env = append(env, e)
		}
	}
	env = append(env, "PLASMAFS_CONFIG="+conf)
	run := func(extra []string, args ...string) (string, error) {
		cmd := exec.Command(c.Bin, args...)
		cmd.Env = append(append([]string(nil), env...), extra...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	c.MustRun("mkdir", "/seen")
	for _, tc := range []struct {
		extra []string
		args  []string
	}{
		{nil, []string{"ls", "-namenode", c.NN.Addr, "/"}},
		{[]string{"PLASMAFS_NAMENODES=" + c.NN.Addr}, []string{"ls", "/"}},
		{nil, []string{"ls", "-namenode", c.NN.Addr, "-cluster", c.Opts.Cluster, "/"}},
	} {
		out, err := run(tc.extra, tc.args...)
		if err != nil || !strings.Contains(out, "seen") {
			t.Errorf("%v plasma %s: %v\n%s", tc.extra, strings.Join(tc.args, " "), err, out)
		}
	}
	// Namenodes no entry lists: no credential, and the message says why.
	out, err := run(nil, "ls", "-namenode", clustertest.FreeAddr(t), "/")
	if err == nil || !strings.Contains(out, "no cluster entry of "+conf+" lists the namenodes") {
		t.Errorf("plasma ls -namenode (an address no entry lists): %v\n%s\nwant a refusal saying no entry lists it", err, out)
	}
}
