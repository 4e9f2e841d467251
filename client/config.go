package client

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/plasmafs/plasma/internal/auth"
	"github.com/plasmafs/plasma/internal/clientconf"
)

// Config says which cluster to use and who the client is.
type Config struct {
	Cluster   string   // cluster name (informational; checked by datanodes later)
	Namenodes []string // host:port of the namenodes; the first reachable is used
	User      string   // file owner for new files (default: the OS user)
	Group     string   // file group for new files (default: User)
	// NoShortCircuit makes the client read local blocks over TCP too.
	NoShortCircuit bool
	// NoDeferDataSync makes an asynchronous commit (CommitAsync, the
	// mount's closes) wait for the datanodes to sync its data, as a
	// durable commit does. By default it does not: the namenode has them
	// sync before the commit becomes durable (at a durable commit, Sync or
	// its window), and strikes the replicas of a datanode that cannot be
	// synced then (docs/design.md, "Deferred data syncs"). Also set by
	// $PLASMAFS_DEFER_DATA_SYNC=0.
	NoDeferDataSync bool
	// DeferDataSync is kept for callers that set it: deferring is the
	// default (NoDeferDataSync turns it off), so it has no effect.
	//
	// Deprecated: deferral is the default; use NoDeferDataSync to turn it off.
	DeferDataSync bool
	// JournalSmallWrites: a durable commit whose only data is a small
	// append into files' last blocks (at most wire.MaxJournalBytes in
	// all) sends those bytes with the commit for the namenode's log
	// instead of having the datanodes sync them first: one durability
	// point instead of two in sequence. Off by default; also set by
	// $PLASMAFS_JOURNAL_SMALL_WRITES=1.
	JournalSmallWrites bool
	// Security and DataSecurity are the levels ("none", "auth",
	// "integrity", "privacy") of namenode and datanode connections; empty
	// means the cluster defaults "privacy" and "auth". A server's level is
	// the least it accepts: a client may choose a stronger one.
	Security     string
	DataSecurity string
	// CredentialFile is the user's credential ('plasma admin user add'),
	// needed above level none.
	CredentialFile string
	// Credential, if set, is used instead of CredentialFile (a delegated
	// credential a MapReduce task server got with a task; see
	// Client.Delegate).
	Credential *auth.Credential
	// KeepaliveInterval is how often the client tells the namenode that it
	// is alive, which keeps its open transactions (readers that need no
	// namenode request for hours) from being aborted as idle. Zero means a
	// third of the namenode's transaction timeout; negative disables it.
	KeepaliveInterval time.Duration
	// AllocWait bounds how long a request that places data (a block
	// allocation, a file's creation, a change of its replication) waits
	// when the namenode refuses it for want of live datanodes while some
	// it knows have not registered with it yet (after a namenode restart
	// or a failover to another member). Zero means DefaultAllocWait;
	// negative means no wait. The context's deadline is kept too. Also
	// set by $PLASMAFS_ALLOC_WAIT (a duration: 10s, 2m).
	AllocWait time.Duration
	// Source says where LoadConfig found the cluster: "-namenode",
	// "$PLASMAFS_NAMENODES" or the configuration file's path.
	Source string
}

// LoadConfig finds the cluster to use, as the original plasma tool did:
// explicit namenodes (with cluster) win; else the entry named cluster in
// the configuration file; else $PLASMAFS_CLUSTER and $PLASMAFS_NAMENODES;
// else the first entry of the configuration file.
func LoadConfig(cluster string, namenodes []string) (cfg Config, err error) {
	// -namenode h1:p,h2:p names a namenode group's members.
	var addrs []string
	for _, a := range namenodes {
		for _, b := range strings.Split(a, ",") {
			if b = strings.TrimSpace(b); b != "" {
				addrs = append(addrs, b)
			}
		}
	}
	namenodes = addrs
	cfg = Config{Cluster: cluster, Namenodes: namenodes}
	defer func() {
		// The environment overrides the file.
		if v := os.Getenv("PLASMAFS_SECURITY"); v != "" {
			cfg.Security = v
		}
		if v := os.Getenv("PLASMAFS_DATA_SECURITY"); v != "" {
			cfg.DataSecurity = v
		}
		if v := os.Getenv("PLASMAFS_CREDENTIAL"); v != "" {
			cfg.CredentialFile = v
		}
		for _, sw := range []struct {
			env string
			on  *bool // set when the variable is 1
			off *bool // set when the variable is 0
		}{{"PLASMAFS_DEFER_DATA_SYNC", nil, &cfg.NoDeferDataSync}, {"PLASMAFS_JOURNAL_SMALL_WRITES", &cfg.JournalSmallWrites, nil}} {
			// Any other value (true, yes) would leave the switch as it is
			// while its user believes it changed.
			switch v := os.Getenv(sw.env); v {
			case "":
			case "0":
				if sw.off != nil {
					*sw.off = true
				}
			case "1":
				if sw.on != nil {
					*sw.on = true
				}
			default:
				if err == nil {
					err = fmt.Errorf("$%s=%q: set it to 1 (on) or 0 (off)", sw.env, v)
				}
			}
		}
		if v := os.Getenv("PLASMAFS_ALLOC_WAIT"); v != "" {
			d, perr := time.ParseDuration(v)
			if perr != nil && err == nil {
				err = fmt.Errorf("$PLASMAFS_ALLOC_WAIT=%q: not a duration (say 30s; 0 for the default, negative for no wait)", v)
			}
			cfg.AllocWait = d
		}
	}()
	if len(namenodes) > 0 {
		cfg.Source = "-namenode"
		cfg.takeIdentity(cluster)
		return cfg, nil
	}
	if cluster == "" {
		cluster = os.Getenv("PLASMAFS_CLUSTER")
		if env := os.Getenv("PLASMAFS_NAMENODES"); env != "" {
			for _, a := range strings.Split(env, ",") {
				if a = strings.TrimSpace(a); a != "" {
					cfg.Namenodes = append(cfg.Namenodes, a)
				}
			}
			cfg.Cluster, cfg.Source = cluster, "$PLASMAFS_NAMENODES"
			cfg.takeIdentity(cluster)
			return cfg, nil
		}
	}
	path := clientconf.Path()
	b, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return cfg, fmt.Errorf("no cluster configured: %s does not exist and PLASMAFS_NAMENODES is not set (start one with 'plasma cluster up', or pass -namenode host:port)", path)
		}
		return cfg, err
	}
	entries, err := clientconf.Parse(string(b))
	if err != nil {
		return cfg, fmt.Errorf("%s: %w", path, err)
	}
	for _, e := range entries {
		if cluster == "" || e.Name == cluster {
			cfg.Cluster, cfg.Source = e.Name, path
			cfg.Namenodes = e.Namenodes
			cfg.Security, cfg.DataSecurity, cfg.CredentialFile = e.Security, e.DataSecurity, e.Credential
			return cfg, nil
		}
	}
	if cluster == "" {
		return cfg, fmt.Errorf("%s lists no cluster", path)
	}
	return cfg, fmt.Errorf("cluster %q is not in %s", cluster, path)
}

// takeIdentity gives a configuration of explicit namenodes (-namenode,
// $PLASMAFS_NAMENODES) the security levels and credential of the
// configuration file's entry for the same cluster: the one named cluster,
// else one that lists one of these namenodes. Naming the addresses says
// where the cluster is, not who the user is; without this a cluster at
// level privacy refused every such command for want of a credential the
// file has. No such entry (or no file): nothing changes; nor when the
// environment sets the levels or the credential itself (it says who the
// client is then).
func (cfg *Config) takeIdentity(cluster string) {
	for _, v := range []string{"PLASMAFS_SECURITY", "PLASMAFS_DATA_SECURITY", "PLASMAFS_CREDENTIAL"} {
		if os.Getenv(v) != "" {
			return
		}
	}
	b, err := os.ReadFile(clientconf.Path())
	if err != nil {
		return
	}
	entries, err := clientconf.Parse(string(b))
	if err != nil {
		return
	}
	for _, e := range entries {
		same := cluster != "" && e.Name == cluster
		if cluster == "" {
			for _, a := range e.Namenodes {
				same = same || slices.Contains(cfg.Namenodes, a)
			}
		}
		if same {
			cfg.Security, cfg.DataSecurity, cfg.CredentialFile = e.Security, e.DataSecurity, e.Credential
			return
		}
	}
}
