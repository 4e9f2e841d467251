package cli

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/plasmafs/plasma/internal/loopback"
	"github.com/plasmafs/plasma/internal/supervisor"
	"github.com/plasmafs/plasma/internal/webhdfs"
)

// The WebHDFS gateway of a 'plasma cluster up' cluster: with -webhdfs
// ADDR a 'plasma webhdfs' member serves the cluster at ADDR with the
// cluster's superuser credential (from DIR/client.conf), supervised like
// the others. Its address is recorded, so that the URL given to Spark or
// fsspec stays valid across restarts.

// webhdfsNone is the -webhdfs value that stops starting the gateway.
const webhdfsNone = "none"

// checkWebHDFSFlag checks the -webhdfs value: HOST:PORT (port 0: a free
// port, chosen once and recorded) or none.
func checkWebHDFSFlag(v string) error {
	if v == "" || v == webhdfsNone {
		return nil
	}
	if _, _, err := net.SplitHostPort(v); err != nil {
		return usagef("-webhdfs %s: want HOST:PORT (port 0 for a free one), or %s: %v", v, webhdfsNone, err)
	}
	return nil
}

// chooseWebHDFSAddr makes the gateway's address concrete (a free port for
// port 0) and checks that it is free; a recorded address in use is an
// error rather than a silent move, since clients are pointed at it.
func (u *clusterUp) chooseWebHDFSAddr() error {
	a := u.settings.WebHDFSAddr
	if a == webhdfsNone {
		a = ""
	}
	u.settings.WebHDFSAddr = a
	if a == "" {
		return nil
	}
	if _, port, _ := net.SplitHostPort(a); port == "0" {
		ln, err := net.Listen("tcp", a)
		if err != nil {
			return fmt.Errorf("-webhdfs %s: %w", a, err)
		}
		u.settings.WebHDFSAddr = ln.Addr().String()
		ln.Close()
		return nil
	}
	if !loopback.Claim(a) {
		how := "choose another with -webhdfs HOST:PORT"
		if !u.given["webhdfs"] {
			how = fmt.Sprintf("it is recorded in %s; stop what listens there, or %s", filepath.Join(u.dir, clusterSettingsFile), how)
		}
		return fmt.Errorf("WebHDFS gateway address %s is in use by another program (%s)", a, how)
	}
	return nil
}

// startWebHDFS starts the gateway (if the cluster has one) with the
// cluster's client configuration and waits until it listens.
func (u *clusterUp) startWebHDFS(ctx context.Context, sv *supervisor.Supervisor) error {
	a := u.settings.WebHDFSAddr
	if a == "" {
		return nil
	}
	m := sv.Add("webhdfs", "webhdfs", []string{"webhdfs", "-cluster", u.name, "-listen", a})
	m.Env = clusterMemberEnv(sv.Dir(), "PLASMAFS_")
	if err := sv.Start(m); err != nil {
		return err
	}
	if err := sv.WaitListening(ctx, a); err != nil {
		return fmt.Errorf("the WebHDFS gateway did not start (see %s): %w", m.Log, err)
	}
	return nil
}

// webhdfsSummary is the "is up" line about the gateway.
func (u *clusterUp) webhdfsSummary() string {
	a := u.settings.WebHDFSAddr
	return fmt.Sprintf("WebHDFS gateway: http://%s%s/ (Hadoop and Spark: webhdfs://%s/; log: %s)", a, webhdfs.Prefix, a, filepath.Join(u.dir, "webhdfs.log"))
}

// clusterMemberEnv is the environment of a member that is a client of the
// cluster: this one's, without the variables starting with one of drop,
// and with the cluster's own client configuration, whatever the
// environment names.
func clusterMemberEnv(dir string, drop ...string) []string {
	var env []string
next:
	for _, kv := range os.Environ() {
		for _, p := range drop {
			if strings.HasPrefix(kv, p) {
				continue next
			}
		}
		env = append(env, kv)
	}
	return append(env, "PLASMAFS_CONFIG="+filepath.Join(dir, "client.conf"))
}
