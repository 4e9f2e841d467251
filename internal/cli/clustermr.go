package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/plasmafs/plasma/internal/auth"
	"github.com/plasmafs/plasma/internal/clientconf"
	"github.com/plasmafs/plasma/internal/supervisor"
)

// The MapReduce task servers of a 'plasma cluster up' cluster: one
// 'plasma mr taskserver' beside each datanode (tsN paired with dnN, with
// its own credential SECRETS/tsN.pem), supervised like the other members.
// Their addresses go into the cluster's client configuration, where
// 'plasma mr run' finds them.

// delegationCredential returns the namenode's delegation certificate
// (SECRETS/delegation.pem, 0600), made if missing: with it the namenode
// signs the credentials users' jobs run with on the task servers.
func delegationCredential(secrets *auth.Secrets, secDir string) (string, error) {
	p := filepath.Join(secDir, "delegation.pem")
	if _, err := auth.LoadDelegator(p); err == nil {
		return p, nil
	}
	c, err := secrets.IssueDelegator()
	if err != nil {
		return "", err
	}
	return p, writePrivate(p, c.PEM())
}

// startTaskServers adds task server tsI paired with datanode dnAddrs[I-1]
// listening at addrs[I-1] with credential creds[I-1], with the cluster's
// client configuration, and waits until each listens.
func startTaskServers(ctx context.Context, sv *supervisor.Supervisor, dnAddrs, addrs, creds []string, slots int) error {
	if len(addrs) == 0 {
		return nil
	}
	env := clusterMemberEnv(sv.Dir(), "PLASMAFS_", "PLASMAMR_")
	var ms []*supervisor.Member
	for i, a := range addrs {
		m := sv.Add(fmt.Sprintf("ts%d", i+1), "taskserver", []string{"mr", "taskserver", "-listen", a, "-datanode", dnAddrs[i],
			"-slots", strconv.Itoa(slots), "-credential", creds[i]})
		m.Env = env
		if err := sv.Start(m); err != nil {
			return err
		}
		ms = append(ms, m)
	}
	for _, m := range ms {
		if err := sv.WaitListening(ctx, m.Args[3]); err != nil {
			return fmt.Errorf("%s did not start (see %s): %w", m, m.Log, err)
		}
	}
	return nil
}

// clusterTaskServers returns the task servers and token file that the
// client configuration names for cluster ("" for the file's first), if
// any.
func clusterTaskServers(cluster string) (servers []string, tokenFile string, err error) {
	b, err := os.ReadFile(clientconf.Path())
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, "", nil
		}
		return nil, "", err
	}
	es, err := clientconf.Parse(string(b))
	if err != nil {
		return nil, "", err
	}
	for _, e := range es {
		if cluster == "" || e.Name == cluster {
			return e.TaskServers, e.TaskServerToken, nil
		}
	}
	return nil, "", nil
}
