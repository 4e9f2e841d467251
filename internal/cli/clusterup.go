package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/auth"
	"github.com/plasmafs/plasma/internal/clientconf"
	"github.com/plasmafs/plasma/internal/loopback"
	"github.com/plasmafs/plasma/internal/supervisor"
	"golang.org/x/sys/unix"
)

// clusterUp is one 'cluster up': its settings (the recorded ones with the
// flags' changes), then what its phases make (credentials, addresses).
type clusterUp struct {
	n            int
	dir, name    string
	bs, size     int64
	nnAddr       string
	detach       bool
	relaxed      bool
	store        string // storeSQLite or storePostgres
	writeCfg     bool
	sec, dataSec string
	mountPoint   string // absolute; "" without -mount
	mountOpts    string
	webhdfs      string // the -webhdfs flag
	tsSlots      int
	restartReset time.Duration
	given        map[string]bool // the flags given
	made         bool            // the cluster has recorded settings
	settings     clusterSettings // what is recorded at the end
	secrets      *auth.Secrets
	secDir       string
	nnCred       string
	adminCred    string
	ticketKey    string
	delegCred    string
	tsAddrs      []string
	cfgPath      string
	cfgChanged   bool
}

// parseClusterUp parses the flags over the cluster's recorded settings
// and checks them.
func parseClusterUp(args []string) (*clusterUp, error) {
	f := newFlags("cluster up", "[options]", `Start a namenode (SQLite) and N datanodes on 127.0.0.1 as separate processes and
write the client configuration. The cluster runs until Ctrl-C (SIGINT or SIGTERM)
or 'plasma cluster down'; a member that dies is reported and restarted with
backoff (one that had run for -restart-reset starts the delay over). With -detach
a background supervisor does this (its log: DIR/cluster.log).
With -mount MOUNTPOINT the cluster is also mounted there with FUSE (as root), a member
like the others: restarted if it dies, unmounted when the cluster stops.
With -webhdfs HOST:PORT a WebHDFS gateway ('plasma webhdfs') serves the cluster there (port 0:
a free port), a member too; its address is recorded like the others ('-webhdfs none' drops it).
A MapReduce task server ('plasma mr taskserver') runs beside each datanode, a member
too; the client configuration names them, so 'plasma mr run' uses them (any user of the
cluster may: tasks run with their submitter's delegated credential, as user nobody).
Everything in DIR is private to its owner (files 0600, directories 0700).
The settings a cluster is made with (name, datanodes, blocksize, volume size, the
addresses of its members, security levels, task server slots, -relaxed) are recorded in
DIR/settings.json; a later 'cluster up' keeps them, except those its flags change.
The client configuration is rewritten only when the cluster's entry changes (other
clusters' entries in it are kept; this one comes first, the clients' default).`, false)
	u := &clusterUp{bs: 1 << 20, size: 4 << 30}
	n := f.intRange("datanodes", 2, 1, 64, "number of datanodes")
	nns := f.intRange("namenodes", 1, 1, 5, "namenodes of a new cluster: 1, or a replicated group of 3 or 5 (members nn1..nnN,\neach with its database DIR/nnN.db; a leader's loss elects another)")
	f.StringVar(&u.dir, "dir", defaultClusterDir(), "directory for the database, volumes and logs")
	f.StringVar(&u.name, "cluster", "local", "cluster name")
	f.sizeRange(&u.bs, "blocksize", 64<<10, 64<<20, "blocksize of a new cluster, a power of two")
	f.sizeRange(&u.size, "size", 64<<10, maxVolume, "size of each new datanode volume")
	f.StringVar(&u.nnAddr, "namenode-addr", "", "namenode address; with -namenodes 3 or 5, the first member's (its Raft port is the next) (default: the recorded one, or a free port for a new cluster)")
	f.BoolVar(&u.detach, "detach", false, "start in the background and return")
	f.BoolVar(&u.relaxed, "relaxed", false, "relaxed commit mode (acknowledge before fsync)")
	store := f.String("store", storeSQLite, "metadata store of a new cluster: sqlite, or postgres (a private PostgreSQL server,\nstarted with the cluster: initdb and pg_ctl of Debian's postgresql package)")
	f.BoolVar(&u.writeCfg, "write-config", true, "write the client configuration ("+clientconf.Path()+")")
	f.StringVar(&u.sec, "security", "privacy", "namenode traffic security: none, auth, integrity or privacy")
	f.StringVar(&u.dataSec, "data-security", "auth", "datanode traffic security: none, auth, integrity or privacy")
	mountFlag := f.String("mount", "", "also mount the cluster with FUSE at this directory (root; created if missing)")
	f.StringVar(&u.mountOpts, "mount-options", "", "with -mount: mount options, as 'plasma mount -o' takes them")
	f.StringVar(&u.webhdfs, "webhdfs", "", "also serve the cluster over WebHDFS at this `HOST:PORT` (port 0: a free port; none: no gateway; default: as recorded)")
	tsSlots := f.intRange("taskserver-slots", 2, 0, 1024, "task attempts each MapReduce task server runs at once (0: no task servers)")
	restartReset := f.durationRange("restart-reset", supervisor.DefaultRestartPolicy.Stable, 0, 24*time.Hour,
		fmt.Sprintf("a member that dies after running this long is restarted after %v again; quicker deaths double the delay, up to %v", supervisor.DefaultRestartPolicy.Min, supervisor.DefaultRestartPolicy.Max))
	if err := f.parse(args); err != nil {
		return nil, err
	}
	if len(f.pos) != 0 {
		return nil, usagef("unexpected argument %q", f.pos[0])
	}
	u.n, u.tsSlots, u.restartReset = *n, *tsSlots, *restartReset
	if *store != storeSQLite && *store != storePostgres {
		return nil, usagef("-store %s: sqlite or postgres", *store)
	}
	u.store = *store
	if err := u.applySettings(f); err != nil {
		return nil, err
	}
	rec, _, _ := loadClusterSettings(u.dir)
	if err := u.checkNamenodes(u.given["namenodes"], *nns, rec, u.made); err != nil {
		return nil, err
	}
	if err := checkWebHDFSFlag(u.webhdfs); err != nil {
		return nil, err
	}
	if err := u.checkMount(*mountFlag); err != nil {
		return nil, err
	}
	if u.bs&(u.bs-1) != 0 {
		return nil, usagef("-blocksize %d: must be a power of two", u.bs)
	}
	if u.size < u.bs {
		return nil, usagef("-size %s is smaller than one block (%s)", sizeString(u.size), sizeString(u.bs))
	}
	if _, err := auth.ParseLevel(u.sec); err != nil {
		return nil, usagef("%v", err)
	}
	if _, err := auth.ParseLevel(u.dataSec); err != nil {
		return nil, usagef("%v", err)
	}
	return u, nil
}

// applySettings keeps the settings the cluster was made with, unless a
// flag changes them.
func (u *clusterUp) applySettings(f *flags) error {
	rec, made, err := loadClusterSettings(u.dir)
	if err != nil {
		return err
	}
	u.made = made
	u.given = map[string]bool{}
	f.Visit(func(fl *flag.Flag) { u.given[fl.Name] = true })
	settings, err := resolveSettings(rec, made, clusterSettings{Cluster: u.name, Datanodes: u.n, Blocksize: u.bs, VolumeSize: u.size, NamenodeAddr: u.nnAddr,
		TaskServerSlots: u.tsSlots, Security: u.sec, DataSecurity: u.dataSec, Relaxed: u.relaxed, Store: u.store, WebHDFSAddr: u.webhdfs}, u.given)
	if err != nil {
		return err
	}
	u.settings = settings
	u.name, u.n, u.bs, u.size, u.nnAddr, u.tsSlots, u.sec, u.dataSec, u.relaxed = settings.Cluster, settings.Datanodes, settings.Blocksize, settings.VolumeSize,
		settings.NamenodeAddr, settings.TaskServerSlots, settings.Security, settings.DataSecurity, settings.Relaxed
	return nil
}

// checkMount checks -mount and -mount-options.
func (u *clusterUp) checkMount(mountFlag string) error {
	if mountFlag == "" {
		if u.mountOpts != "" {
			return usagef("-mount-options needs -mount DIR")
		}
		return nil
	}
	if _, _, err := mountOptions([]string{u.mountOpts}); err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return usagef("-mount needs root (the FUSE mount is made with mount(2))")
	}
	var err error
	u.mountPoint, err = filepath.Abs(mountFlag)
	return err
}

// prepareDir makes the cluster's directory private and checks that no
// cluster runs there and the mountpoint is free.
func (u *clusterUp) prepareDir() error {
	// Secrets, the database, logs and the configuration naming the
	// credential are for the cluster's owner only; the members inherit
	// the mask.
	unix.Umask(0o077)
	if err := os.MkdirAll(u.dir, 0o700); err != nil {
		return err
	}
	if pids, _ := readPids(u.dir); anyRunning(pids) {
		return fmt.Errorf("a cluster is already running in %s (stop it with 'plasma cluster down -dir %s')", u.dir, u.dir)
	}
	tightenPermissions(u.dir)
	if u.mountPoint != "" {
		// Before anything starts: a mountpoint in use is an error, a
		// stale mount left by this cluster's mount process is cleared.
		if err := os.MkdirAll(u.mountPoint, 0o755); err != nil {
			return err
		}
		if err := clearStaleMount(u.mountPoint); err != nil {
			return err
		}
	}
	return nil
}

// createVolumes formats the namespace of a new cluster and creates the
// datanode volumes that are missing, if they fit.
func (u *clusterUp) createVolumes(ctx context.Context) error {
	var missing int64
	for i := 1; i <= u.n; i++ {
		if _, err := os.Stat(filepath.Join(u.dir, fmt.Sprintf("dn%d", i), "config")); err != nil {
			missing++
		}
	}
	if missing > 0 && u.size <= math.MaxInt64/missing {
		if err := checkSpace(u.dir, missing*u.size); err != nil {
			return err
		}
	}
	// The namespace is formatted only with the cluster's first volumes (so
	// restarts of the namenode never format).
	if u.settings.Store == storePostgres {
		if err := formatNewPostgresCluster(ctx, u.dir, u.n); err != nil {
			return err
		}
	} else if u.groupMode() {
		if err := u.formatGroup(ctx); err != nil {
			return err
		}
	} else if err := formatNewCluster(filepath.Join(u.dir, "namenode.db"), u.dir, u.n); err != nil {
		return err
	}
	for i := 1; i <= u.n; i++ {
		vol := filepath.Join(u.dir, fmt.Sprintf("dn%d", i))
		if _, err := os.Stat(filepath.Join(vol, "config")); err == nil {
			continue
		}
		if err := cmdDatanodeInit(ctx, []string{"-dir", vol, "-cluster", u.name, "-blocksize", strconv.FormatInt(u.bs, 10), "-size", strconv.FormatInt(u.size, 10)}); err != nil {
			return err
		}
	}
	return nil
}

// loadCredentials loads (or makes) the cluster secrets and the
// namenode's, administrator's and delegation credentials.
func (u *clusterUp) loadCredentials() error {
	u.secDir = filepath.Join(u.dir, "secrets")
	var err error
	if u.secrets, err = auth.LoadSecrets(u.secDir); err != nil {
		if u.secrets, err = auth.InitSecrets(u.secDir, u.name); err != nil {
			return fmt.Errorf("create cluster secrets: %w", err)
		}
	}
	if u.nnCred, err = u.issue("namenode.pem", "namenode", auth.RoleNamenode); err != nil {
		return err
	}
	if u.adminCred, err = u.issue("admin.pem", currentUser(), auth.RoleSuperuser); err != nil {
		return err
	}
	u.ticketKey = filepath.Join(u.secDir, "ticket.key")
	u.delegCred, err = delegationCredential(u.secrets, u.secDir)
	return err
}

// issue returns the credential file of a member, issued by the cluster
// secrets unless it exists: kept unless it is unreadable or was issued
// with another role (by an older version).
func (u *clusterUp) issue(file, who string, role auth.Role) (string, error) {
	p := filepath.Join(u.secDir, file)
	if c, err := auth.LoadCredential(p); err == nil && c.Identity.Role == role {
		return p, nil
	}
	c, err := u.secrets.Issue(who, role, nil)
	if err != nil {
		return "", err
	}
	return p, os.WriteFile(p, c.PEM(), 0o600)
}

// chooseAddrs picks the namenode's address (the recorded one, checked to
// be free, or a free port) and the datanodes'.
func (u *clusterUp) chooseAddrs() error {
	var err error
	if u.groupMode() {
		err = u.chooseGroupAddrs()
	} else if u.nnAddr == "" {
		if u.nnAddr, err = freePort(); err != nil {
			return err
		}
	} else if !loopback.Claim(u.nnAddr) {
		how := "choose another with -namenode-addr"
		if !u.given["namenode-addr"] {
			how = fmt.Sprintf("it is recorded in %s; stop what listens there, or %s", filepath.Join(u.dir, clusterSettingsFile), how)
		}
		return fmt.Errorf("namenode address %s is in use by another program (%s)", u.nnAddr, how)
	}
	if err != nil {
		return err
	}
	u.settings.NamenodeAddr = u.nnAddr
	if u.settings.DatanodeAddrs, err = keptAddrs(u.settings.DatanodeAddrs, u.n); err != nil {
		return err
	}
	if err := u.chooseWebHDFSAddr(); err != nil {
		return err
	}
	u.settings.AdminAddrs, err = keptAdminAddrs(u.settings.AdminAddrs, clusterMembers(u.n, u.tsSlots > 0, u.mountPoint != "", u.settings.WebHDFSAddr != ""))
	if u.groupMode() {
		delete(u.settings.AdminAddrs, "namenode") // group members serve no admin port yet
	}
	return err
}

// newSupervisor makes the supervisor of the cluster's members.
func (u *clusterUp) newSupervisor() (*supervisor.Supervisor, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	policy := supervisor.DefaultRestartPolicy
	policy.Stable = u.restartReset
	sv := supervisor.New(self, u.dir, policy, stdout, escapeText)
	sv.MemberArgs = func(name, kind string, args []string) []string {
		if a := u.settings.AdminAddrs[name]; a != "" {
			return withAdminFlag(args, kind, a)
		}
		return args
	}
	return sv, nil
}

// startMembers starts the namenode, the datanodes, then (with the client
// configurations written and the settings recorded) the task servers, the
// WebHDFS gateway and the mount, and says so.
func (u *clusterUp) startMembers(ctx context.Context, sv *supervisor.Supervisor) error {
	if err := u.startNamenode(ctx, sv); err != nil {
		return err
	}
	dnAddrs, err := u.startDatanodes(ctx, sv)
	if err != nil {
		return err
	}
	tsCreds, err := u.taskServerCredentials()
	if err != nil {
		return err
	}
	if err := u.writeConfigs(); err != nil {
		return err
	}
	if err := startTaskServers(ctx, sv, dnAddrs, u.tsAddrs, tsCreds, u.tsSlots); err != nil {
		return err
	}
	if err := u.startWebHDFS(ctx, sv); err != nil {
		return err
	}
	if u.mountPoint != "" {
		if err := startMount(ctx, sv, u.mountPoint, u.mountOpts, u.name); err != nil {
			return err
		}
	}
	u.printUp()
	return nil
}

// startNamenode starts the namenode and waits until it listens.
func (u *clusterUp) startNamenode(ctx context.Context, sv *supervisor.Supervisor) error {
	if u.groupMode() {
		return u.startGroup(ctx, sv) // clustergroup.go
	}
	storeArgs, err := u.clusterStoreArgs()
	if err != nil {
		return err
	}
	nnArgs := append([]string{"namenode", "-listen", u.nnAddr}, storeArgs...)
	nnArgs = append(nnArgs, "-cluster", u.name, "-blocksize", strconv.FormatInt(u.bs, 10),
		"-security", u.sec, "-data-security", u.dataSec, "-credential", u.nnCred, "-ticket-key", u.ticketKey, "-delegation-credential", u.delegCred)
	if u.relaxed {
		nnArgs = append(nnArgs, "-relaxed")
	}
	nnArgs = append(nnArgs, "-datanode-admin", datanodeAdminLinks(u.settings.DatanodeAddrs, u.settings.AdminAddrs))
	nn := sv.Add("namenode", "namenode", nnArgs)
	if err := sv.Start(nn); err != nil {
		return err
	}
	if err := sv.WaitListening(ctx, u.nnAddr); err != nil {
		return fmt.Errorf("namenode did not start (see %s): %w", nn.Log, err)
	}
	return nil
}

// startDatanodes starts the datanodes and waits until all registered;
// it returns their addresses.
func (u *clusterUp) startDatanodes(ctx context.Context, sv *supervisor.Supervisor) ([]string, error) {
	var dnAddrs []string
	for i := 1; i <= u.n; i++ {
		addr := u.settings.DatanodeAddrs[i-1]
		dnCred, err := u.issue(fmt.Sprintf("dn%d.pem", i), fmt.Sprintf("datanode%d", i), auth.RoleDatanode)
		if err != nil {
			return nil, err
		}
		dnAddrs = append(dnAddrs, addr)
		dn := sv.Add(fmt.Sprintf("dn%d", i), "datanode", []string{"datanode", "-dir", filepath.Join(u.dir, fmt.Sprintf("dn%d", i)), "-listen", addr, "-namenode", strings.Join(u.namenodeList(), ","),
			"-security", u.dataSec, "-namenode-security", u.sec, "-credential", dnCred, "-ticket-key", u.ticketKey})
		if err := sv.Start(dn); err != nil {
			return nil, err
		}
	}
	cfg := client.Config{Cluster: u.name, Namenodes: u.namenodeList(), Security: u.sec, DataSecurity: u.dataSec, CredentialFile: u.adminCred}
	if err := sv.WaitDatanodes(ctx, cfg, u.n); err != nil {
		return nil, fmt.Errorf("%w (see the logs in %s)", err, u.dir)
	}
	return dnAddrs, nil
}

// taskServerCredentials chooses the task servers' addresses and returns
// their credential files (none without task servers).
func (u *clusterUp) taskServerCredentials() ([]string, error) {
	if u.tsSlots == 0 {
		return nil, nil
	}
	var err error
	if u.tsAddrs, err = keptAddrs(u.settings.TaskServerAddrs, u.n); err != nil {
		return nil, err
	}
	var creds []string
	for i := 1; i <= u.n; i++ {
		c, err := u.issue(fmt.Sprintf("ts%d.pem", i), fmt.Sprintf("taskserver%d", i), auth.RoleTaskServer)
		if err != nil {
			return nil, err
		}
		creds = append(creds, c)
	}
	return creds, nil
}

// writeConfigs writes the cluster's client configuration (DIR/client.conf,
// and with -write-config the user's) and records the settings.
func (u *clusterUp) writeConfigs() error {
	entry := clientconf.Cluster{Name: u.name, Namenodes: u.namenodeList(), Security: u.sec, DataSecurity: u.dataSec, Credential: u.adminCred,
		TaskServers: u.tsAddrs}
	if _, err := updateClientConfig(filepath.Join(u.dir, "client.conf"), entry); err != nil {
		return err
	}
	u.cfgPath = clientconf.Path()
	if u.writeCfg {
		var err error
		if u.cfgChanged, err = updateClientConfig(u.cfgPath, entry); err != nil {
			return err
		}
	}
	u.settings.TaskServerAddrs = u.tsAddrs
	return u.settings.save(u.dir)
}

// printUp says what is up and how to use it.
func (u *clusterUp) printUp() {
	fmt.Fprintf(stdout, "PlasmaFS cluster %q is up: namenode %s, %d datanodes, blocksize %d, data in %s\n", u.name, strings.Join(u.namenodeList(), ","), u.n, u.bs, u.dir)
	fmt.Fprintf(stdout, "admin: %s\n", adminSummary(u.settings.AdminAddrs))
	if len(u.tsAddrs) > 0 {
		fmt.Fprintf(stdout, "MapReduce task servers (one beside each datanode, %d slots each): %s\n", u.tsSlots, strings.Join(u.tsAddrs, " "))
	}
	if u.settings.WebHDFSAddr != "" {
		fmt.Fprintln(stdout, u.webhdfsSummary())
	}
	if u.mountPoint != "" {
		fmt.Fprintf(stdout, "mounted at %s (FUSE; log: %s)\n", u.mountPoint, filepath.Join(u.dir, "mount.log"))
	}
	fmt.Fprintf(stdout, "security: namenode %s, datanodes %s; your superuser credential is %s\n", u.sec, u.dataSec, u.adminCred)
	if u.made {
		fmt.Fprintf(stdout, "settings as recorded in %s, except those changed by flags given here\n", filepath.Join(u.dir, clusterSettingsFile))
	}
	switch {
	case u.writeCfg && u.cfgChanged:
		fmt.Fprintf(stdout, "client configuration written to %s; try:\n", u.cfgPath)
	case u.writeCfg:
		fmt.Fprintf(stdout, "client configuration in %s is up to date; try:\n", u.cfgPath)
	default:
		fmt.Fprintf(stdout, "use it with: export PLASMAFS_CONFIG=%s\n", filepath.Join(u.dir, "client.conf"))
	}
	fmt.Fprintf(stdout, "  plasma put -rep 2 somefile /somefile\n  plasma ls -l /\n  plasma blocks /somefile\n")
}

// handOverOutput ends the detaching parent's wait: from now on the
// background supervisor's output goes to its log; the parent sees the end
// of its output and returns.
func (u *clusterUp) handOverOutput(sv *supervisor.Supervisor, ready *os.File) error {
	fmt.Fprintf(stdout, "members that die are restarted (log: %s)\nstop it with: plasma cluster down -dir %s\n", filepath.Join(u.dir, "cluster.log"), u.dir)
	lf, err := os.OpenFile(filepath.Join(u.dir, "cluster.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	unix.Dup2(int(lf.Fd()), 1)
	unix.Dup2(int(lf.Fd()), 2)
	lf.Close()
	io.WriteString(ready, "up\n")
	ready.Close()
	sv.Report("cluster %q is up: namenode %s, %d datanodes", u.name, strings.Join(u.namenodeList(), ","), u.n)
	return nil
}
