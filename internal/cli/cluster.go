package cli

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/auth"
	"golang.org/x/sys/unix"
)

func init() {
	register("cluster up", "[-datanodes N] [-dir DIR] [-blocksize B] [-size BYTES] [-mount DIR] [-detach]", "start a local cluster (namenode + N datanodes, optionally a FUSE mount) and restart members that die", cmdClusterUp)
	register("cluster down", "[-dir DIR]", "stop a local cluster started with 'plasma cluster up'", cmdClusterDown)
}

func defaultClusterDir() string {
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".plasma", "cluster")
	}
	return "plasma-cluster"
}

func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// envSupervisor is set for the background supervisor that 'cluster up
// -detach' starts; it reports readiness on file descriptor 3.
const envSupervisor = "PLASMA_CLUSTER_SUPERVISOR"

func cmdClusterUp(ctx context.Context, args []string) error {
	f := newFlags("cluster up", "[options]", `Start a namenode (SQLite) and N datanodes on 127.0.0.1 as separate processes and
write the client configuration. The cluster runs until Ctrl-C (SIGINT or SIGTERM)
or 'plasma cluster down'; a member that dies is reported and restarted with
backoff (one that had run for -restart-reset starts the delay over). With -detach
a background supervisor does this (its log: DIR/cluster.log).
With -mount MOUNTPOINT the cluster is also mounted there with FUSE (as root), a member
like the others: restarted if it dies, unmounted when the cluster stops.
A MapReduce task server ('plasma mr taskserver') runs beside each datanode, a member
too; the client configuration names them, so 'plasma mr run' uses them (any user of the
cluster may: tasks run with their submitter's delegated credential, as user nobody).
Everything in DIR is private to its owner (files 0600, directories 0700).
The settings a cluster is made with (name, datanodes, blocksize, volume size, the
addresses of its members, security levels, task server slots, -relaxed) are recorded in
DIR/settings.json; a later 'cluster up' keeps them, except those its flags change.
The client configuration is rewritten only when the cluster's entry changes (other
clusters' entries in it are kept; this one comes first, the clients' default).`, false)
	n := f.intRange("datanodes", 2, 1, 64, "number of datanodes")
	dir := f.String("dir", defaultClusterDir(), "directory for the database, volumes and logs")
	name := f.String("cluster", "local", "cluster name")
	var bs int64 = 1 << 20
	var size int64 = 4 << 30
	f.sizeRange(&bs, "blocksize", 64<<10, 64<<20, "blocksize of a new cluster, a power of two")
	f.sizeRange(&size, "size", 64<<10, maxVolume, "size of each new datanode volume")
	nnAddr := f.String("namenode-addr", "", "namenode address (default: the recorded one, or a free port for a new cluster)")
	detach := f.Bool("detach", false, "start in the background and return")
	relaxed := f.Bool("relaxed", false, "relaxed commit mode (acknowledge before fsync)")
	writeCfg := f.Bool("write-config", true, "write the client configuration ("+client.ConfigFile()+")")
	secFlag := f.String("security", "privacy", "namenode traffic security: none, auth, integrity or privacy")
	dataSecFlag := f.String("data-security", "auth", "datanode traffic security: none, auth, integrity or privacy")
	mountFlag := f.String("mount", "", "also mount the cluster with FUSE at this directory (root; created if missing)")
	mountOpts := f.String("mount-options", "", "with -mount: mount options, as 'plasma mount -o' takes them")
	tsSlots := f.intRange("taskserver-slots", 2, 0, 1024, "task attempts each MapReduce task server runs at once (0: no task servers)")
	restartReset := f.durationRange("restart-reset", defaultRestartPolicy.stable, 0, 24*time.Hour,
		fmt.Sprintf("a member that dies after running this long is restarted after %v again; quicker deaths double the delay, up to %v", defaultRestartPolicy.min, defaultRestartPolicy.max))
	if err := f.parse(args); err != nil {
		return err
	}
	if len(f.pos) != 0 {
		return usagef("unexpected argument %q", f.pos[0])
	}
	// The settings the cluster was made with stay, unless a flag changes
	// them.
	rec, made, err := loadClusterSettings(*dir)
	if err != nil {
		return err
	}
	given := map[string]bool{}
	f.Visit(func(fl *flag.Flag) { given[fl.Name] = true })
	settings, err := resolveSettings(rec, made, clusterSettings{Cluster: *name, Datanodes: *n, Blocksize: bs, VolumeSize: size, NamenodeAddr: *nnAddr,
		TaskServerSlots: *tsSlots, Security: *secFlag, DataSecurity: *dataSecFlag, Relaxed: *relaxed}, given)
	if err != nil {
		return err
	}
	*name, *n, bs, size, *nnAddr, *tsSlots, *secFlag, *dataSecFlag, *relaxed = settings.Cluster, settings.Datanodes, settings.Blocksize, settings.VolumeSize,
		settings.NamenodeAddr, settings.TaskServerSlots, settings.Security, settings.DataSecurity, settings.Relaxed
	mountPoint := ""
	if *mountFlag != "" {
		if _, _, err := mountOptions([]string{*mountOpts}); err != nil {
			return err
		}
		if os.Geteuid() != 0 {
			return usagef("-mount needs root (the FUSE mount is made with mount(2))")
		}
		var err error
		if mountPoint, err = filepath.Abs(*mountFlag); err != nil {
			return err
		}
	} else if *mountOpts != "" {
		return usagef("-mount-options needs -mount DIR")
	}
	if bs&(bs-1) != 0 {
		return usagef("-blocksize %d: must be a power of two", bs)
	}
	if size < bs {
		return usagef("-size %s is smaller than one block (%s)", sizeString(size), sizeString(bs))
	}
	if _, err := auth.ParseLevel(*secFlag); err != nil {
		return usagef("%v", err)
	}
	if _, err := auth.ParseLevel(*dataSecFlag); err != nil {
		return usagef("%v", err)
	}
	var ready *os.File // the detaching parent's readiness pipe
	if os.Getenv(envSupervisor) != "" {
		syscall.CloseOnExec(3) // not for the members
		ready = os.NewFile(3, "ready")
		os.Unsetenv(envSupervisor)
	}
	// Secrets, the database, logs and the configuration naming the
	// credential are for the cluster's owner only; the members inherit
	// the mask.
	syscall.Umask(0o077)
	if err := os.MkdirAll(*dir, 0o700); err != nil {
		return err
	}
	if pids, _ := readPids(*dir); anyRunning(pids) {
		return fmt.Errorf("a cluster is already running in %s (stop it with 'plasma cluster down -dir %s')", *dir, *dir)
	}
	tightenPermissions(*dir)
	if mountPoint != "" {
		// Before anything starts: a mountpoint in use is an error, a
		// stale mount left by this cluster's mount process is cleared.
		if err := os.MkdirAll(mountPoint, 0o755); err != nil {
			return err
		}
		if err := clearStaleMount(mountPoint); err != nil {
			return err
		}
	}
	if *detach && ready == nil {
		return startSupervisor(ctx, args)
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	var missing int64
	for i := 1; i <= *n; i++ {
		if _, err := os.Stat(filepath.Join(*dir, fmt.Sprintf("dn%d", i), "config")); err != nil {
			missing++
		}
	}
	if missing > 0 && size <= math.MaxInt64/missing {
		if err := checkSpace(*dir, missing*size); err != nil {
			return err
		}
	}
	// The namespace is formatted only with the cluster's first volumes (so
	// restarts of the namenode never format).
	if err := formatNewCluster(filepath.Join(*dir, "namenode.db"), *dir, *n); err != nil {
		return err
	}
	for i := 1; i <= *n; i++ {
		vol := filepath.Join(*dir, fmt.Sprintf("dn%d", i))
		if _, err := os.Stat(filepath.Join(vol, "config")); err == nil {
			continue
		}
		if err := cmdDatanodeInit(ctx, []string{"-dir", vol, "-cluster", *name, "-blocksize", strconv.FormatInt(bs, 10), "-size", strconv.FormatInt(size, 10)}); err != nil {
			return err
		}
	}
	// Cluster secrets and the daemons' and administrator's credentials.
	secDir := filepath.Join(*dir, "secrets")
	secrets, err := auth.LoadSecrets(secDir)
	if err != nil {
		if secrets, err = auth.InitSecrets(secDir, *name); err != nil {
			return fmt.Errorf("create cluster secrets: %w", err)
		}
	}
	issue := func(file, who string, role auth.Role) (string, error) {
		p := filepath.Join(secDir, file)
		// Kept unless it is unreadable or was issued with another role
		// (by an older version).
		if c, err := auth.LoadCredential(p); err == nil && c.Identity.Role == role {
			return p, nil
		}
		c, err := secrets.Issue(who, role, nil)
		if err != nil {
			return "", err
		}
		return p, os.WriteFile(p, c.PEM(), 0o600)
	}
	nnCred, err := issue("namenode.pem", "namenode", auth.RoleNamenode)
	if err != nil {
		return err
	}
	adminCred, err := issue("admin.pem", currentUser(), auth.RoleSuperuser)
	if err != nil {
		return err
	}
	ticketKey := filepath.Join(secDir, "ticket.key")
	delegCred, err := delegationCredential(secrets, secDir)
	if err != nil {
		return err
	}
	if *nnAddr == "" {
		if *nnAddr, err = freePort(); err != nil {
			return err
		}
	} else if !addrFree(*nnAddr) {
		how := "choose another with -namenode-addr"
		if !given["namenode-addr"] {
			how = fmt.Sprintf("it is recorded in %s; stop what listens there, or %s", filepath.Join(*dir, clusterSettingsFile), how)
		}
		return fmt.Errorf("namenode address %s is in use by another program (%s)", *nnAddr, how)
	}
	settings.NamenodeAddr = *nnAddr
	if settings.DatanodeAddrs, err = keptAddrs(settings.DatanodeAddrs, *n); err != nil {
		return err
	}
	if settings.AdminAddrs, err = keptAdminAddrs(settings.AdminAddrs, clusterMembers(*n, *tsSlots > 0, mountPoint != "")); err != nil {
		return err
	}
	policy := defaultRestartPolicy
	policy.stable = *restartReset
	sv := &supervisor{self: self, dir: *dir, policy: policy, exits: make(chan exitEvent, 130), restart: make(chan *member), done: make(chan struct{}),
		admin: settings.AdminAddrs}
	nnArgs := []string{"namenode", "-listen", *nnAddr, "-db", filepath.Join(*dir, "namenode.db"), "-cluster", *name, "-blocksize", strconv.FormatInt(bs, 10),
		"-security", *secFlag, "-credential", nnCred, "-ticket-key", ticketKey, "-delegation-credential", delegCred}
	if *relaxed {
		nnArgs = append(nnArgs, "-relaxed")
	}
	nnArgs = append(nnArgs, "-datanode-admin", datanodeAdminLinks(settings.DatanodeAddrs, settings.AdminAddrs))
	nn := sv.add("namenode", "namenode", nnArgs)
	if err := sv.start(nn); err != nil {
		sv.stop()
		return err
	}
	if err := sv.waitListening(ctx, *nnAddr); err != nil {
		sv.stop()
		return fmt.Errorf("namenode did not start (see %s): %w", nn.log, err)
	}
	var dnAddrs []string
	for i := 1; i <= *n; i++ {
		addr := settings.DatanodeAddrs[i-1]
		dnCred, err := issue(fmt.Sprintf("dn%d.pem", i), fmt.Sprintf("datanode%d", i), auth.RoleDatanode)
		if err != nil {
			sv.stop()
			return err
		}
		dnAddrs = append(dnAddrs, addr)
		dn := sv.add(fmt.Sprintf("dn%d", i), "datanode", []string{"datanode", "-dir", filepath.Join(*dir, fmt.Sprintf("dn%d", i)), "-listen", addr, "-namenode", *nnAddr,
			"-security", *dataSecFlag, "-namenode-security", *secFlag, "-credential", dnCred, "-ticket-key", ticketKey})
		if err := sv.start(dn); err != nil {
			sv.stop()
			return err
		}
	}
	cfg := client.Config{Cluster: *name, Namenodes: []string{*nnAddr}, Security: *secFlag, DataSecurity: *dataSecFlag, CredentialFile: adminCred}
	if err := sv.waitDatanodes(ctx, cfg, *n); err != nil {
		sv.stop()
		return fmt.Errorf("%w (see the logs in %s)", err, *dir)
	}
	var tsAddrs, tsCreds []string
	if *tsSlots > 0 {
		if tsAddrs, err = keptAddrs(settings.TaskServerAddrs, *n); err != nil {
			sv.stop()
			return err
		}
		for i := 1; i <= *n; i++ {
			c, err := issue(fmt.Sprintf("ts%d.pem", i), fmt.Sprintf("taskserver%d", i), auth.RoleTaskServer)
			if err != nil {
				sv.stop()
				return err
			}
			tsCreds = append(tsCreds, c)
		}
	}
	entry := client.ClusterEntry{Name: *name, Namenodes: []string{*nnAddr}, Security: *secFlag, DataSecurity: *dataSecFlag, Credential: adminCred,
		TaskServers: tsAddrs}
	if _, err := updateClientConfig(filepath.Join(*dir, "client.conf"), entry); err != nil {
		sv.stop()
		return err
	}
	cfgPath := client.ConfigFile()
	cfgChanged := false
	if *writeCfg {
		if cfgChanged, err = updateClientConfig(cfgPath, entry); err != nil {
			sv.stop()
			return err
		}
	}
	settings.TaskServerAddrs = tsAddrs
	if err := settings.save(*dir); err != nil {
		sv.stop()
		return err
	}
	if err := sv.startTaskServers(ctx, dnAddrs, tsAddrs, tsCreds, *tsSlots); err != nil {
		sv.stop()
		return err
	}
	if mountPoint != "" {
		if err := sv.startMount(ctx, mountPoint, *mountOpts, *name); err != nil {
			sv.stop()
			return err
		}
	}
	fmt.Fprintf(stdout, "PlasmaFS cluster %q is up: namenode %s, %d datanodes, blocksize %d, data in %s\n", *name, *nnAddr, *n, bs, *dir)
	fmt.Fprintf(stdout, "admin: %s\n", adminSummary(settings.AdminAddrs))
	if len(tsAddrs) > 0 {
		fmt.Fprintf(stdout, "MapReduce task servers (one beside each datanode, %d slots each): %s\n", *tsSlots, strings.Join(tsAddrs, " "))
	}
	if mountPoint != "" {
		fmt.Fprintf(stdout, "mounted at %s (FUSE; log: %s)\n", mountPoint, filepath.Join(*dir, "mount.log"))
	}
	fmt.Fprintf(stdout, "security: namenode %s, datanodes %s; your superuser credential is %s\n", *secFlag, *dataSecFlag, adminCred)
	if made {
		fmt.Fprintf(stdout, "settings as recorded in %s, except those changed by flags given here\n", filepath.Join(*dir, clusterSettingsFile))
	}
	switch {
	case *writeCfg && cfgChanged:
		fmt.Fprintf(stdout, "client configuration written to %s; try:\n", cfgPath)
	case *writeCfg:
		fmt.Fprintf(stdout, "client configuration in %s is up to date; try:\n", cfgPath)
	default:
		fmt.Fprintf(stdout, "use it with: export PLASMAFS_CONFIG=%s\n", filepath.Join(*dir, "client.conf"))
	}
	fmt.Fprintf(stdout, "  plasma put -rep 2 somefile /somefile\n  plasma ls -l /\n  plasma blocks /somefile\n")
	if ready != nil {
		fmt.Fprintf(stdout, "members that die are restarted (log: %s)\nstop it with: plasma cluster down -dir %s\n", filepath.Join(*dir, "cluster.log"), *dir)
		// From now on the supervisor's output goes to its log; the
		// parent sees the end of its output and returns.
		lf, err := os.OpenFile(filepath.Join(*dir, "cluster.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			sv.stop()
			return err
		}
		unix.Dup2(int(lf.Fd()), 1)
		unix.Dup2(int(lf.Fd()), 2)
		lf.Close()
		io.WriteString(ready, "up\n")
		ready.Close()
		sv.report("cluster %q is up: namenode %s, %d datanodes", *name, *nnAddr, *n)
	} else {
		fmt.Fprintf(stdout, "members that die are restarted; press Ctrl-C (or run 'plasma cluster down -dir %s') to stop\n", *dir)
		// Closing the terminal stops the cluster too.
		var stop context.CancelFunc
		ctx, stop = signal.NotifyContext(ctx, syscall.SIGHUP)
		defer stop()
	}
	return sv.supervise(ctx)
}

// startSupervisor runs 'cluster up' again as a background supervisor in
// its own session, relays its output until the cluster is up (or start-up
// failed) and returns.
func startSupervisor(ctx context.Context, args []string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return err
	}
	defer outR.Close()
	readyR, readyW, err := os.Pipe()
	if err != nil {
		outW.Close()
		return err
	}
	defer readyR.Close()
	cmd := exec.Command(self, append([]string{"cluster", "up"}, args...)...)
	cmd.Env = append(os.Environ(), envSupervisor+"=1")
	cmd.Stdout, cmd.Stderr = outW, outW
	cmd.ExtraFiles = []*os.File{readyW}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	err = cmd.Start()
	outW.Close()
	readyW.Close()
	if err != nil {
		return err
	}
	relayed := make(chan struct{})
	go func() { io.Copy(stdout, outR); close(relayed) }()
	// Ctrl-C during start-up stops the supervisor (and what it started).
	stopSupervisor := context.AfterFunc(ctx, func() { cmd.Process.Signal(syscall.SIGTERM) })
	defer stopSupervisor()
	line, _ := bufio.NewReader(readyR).ReadString('\n')
	<-relayed
	if line == "up\n" {
		return cmd.Process.Release()
	}
	st, err := cmd.Process.Wait()
	if err != nil {
		return err
	}
	if code := st.ExitCode(); code > 0 {
		return exitStatus(code) // it said why
	}
	return fmt.Errorf("cluster supervisor ended during start-up (%v)", st)
}

// A member is one process of the cluster.
type member struct {
	name string // dn1, namenode, mount
	kind string // datanode, namenode, mount
	log  string
	args []string
	env  []string  // nil: the supervisor's
	cmd  *exec.Cmd // nil while not running
	// backoff says when it started and how long to wait before its
	// next restart.
	backoff *restartBackoff
	// For the mount: prestart clears a stale mount before each start;
	// ready receives what the mount process reports on its readiness
	// descriptor ("ok" or why it failed); cleanup unmounts what is left
	// once the member has stopped.
	prestart func() error
	ready    chan string
	cleanup  func()
}

func (m *member) String() string {
	if m.kind == m.name {
		return m.name
	}
	return m.kind + " " + m.name
}

type exitEvent struct {
	m   *member
	err error
}

// supervisor starts the cluster's members and restarts those that die.
type supervisor struct {
	self    string
	dir     string
	policy  restartPolicy
	members []*member
	exits   chan exitEvent    // a member's process ended
	restart chan *member      // a member's backoff is over
	done    chan struct{}     // closed when stopping: no more restarts
	admin   map[string]string // member name → its -admin-listen address
}

func (sv *supervisor) add(name, kind string, args []string) *member {
	if a := sv.admin[name]; a != "" {
		args = withAdminFlag(args, kind, a)
	}
	m := &member{name: name, kind: kind, log: filepath.Join(sv.dir, name+".log"), args: args, backoff: newRestartBackoff(sv.policy, time.Now)}
	sv.members = append(sv.members, m)
	return m
}

func (sv *supervisor) report(format string, args ...any) {
	fmt.Fprintf(stdout, "%s plasma cluster: %s\n", time.Now().Format("2006-01-02 15:04:05"), fmt.Sprintf(format, args...))
}

// start starts m's process; its end arrives on sv.exits.
func (sv *supervisor) start(m *member) error {
	lf, err := os.OpenFile(m.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer lf.Close()
	if m.prestart != nil {
		if err := m.prestart(); err != nil {
			return fmt.Errorf("start %s: %w", m, err)
		}
	}
	cmd := exec.Command(sv.self, m.args...)
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.Env = m.env
	if m.ready != nil {
		r, w, err := os.Pipe()
		if err != nil {
			return err
		}
		defer w.Close()
		cmd.ExtraFiles = []*os.File{w}
		cmd.Env = append(cmd.Env, mountReadyFD+"=3")
		go func() {
			msg, _ := io.ReadAll(r)
			r.Close()
			select {
			case m.ready <- string(msg):
			default: // nobody waits for it (a restart)
			}
		}()
	}
	// Its own process group: Ctrl-C reaches the supervisor only, which
	// stops the members in order.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", m, err)
	}
	m.cmd = cmd
	m.backoff.start()
	go func() { err := cmd.Wait(); sv.exits <- exitEvent{m, err} }()
	return sv.writePids()
}

// writePids records the supervisor's and the running members' process ids
// for 'cluster down'.
func (sv *supervisor) writePids() error {
	lines := []string{fmt.Sprintf("supervisor %d", os.Getpid())}
	for _, m := range sv.members {
		if m.cmd != nil {
			lines = append(lines, fmt.Sprintf("%s %d", m.name, m.cmd.Process.Pid))
		}
	}
	return writePrivate(filepath.Join(sv.dir, "pids"), []byte(strings.Join(lines, "\n")+"\n"))
}

// exited handles a member's end during start-up and returns it as an error.
func (sv *supervisor) exited(ev exitEvent) error {
	ev.m.cmd = nil
	return fmt.Errorf("%s exited during start-up (%v)%s", ev.m, ev.err, lastLogLine(ev.m.log))
}

// supervise restarts members that die until ctx ends, then stops them all.
func (sv *supervisor) supervise(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			sv.report("stopping cluster")
			sv.stop()
			sv.report("cluster stopped")
			return nil
		case ev := <-sv.exits:
			m := ev.m
			pid := m.cmd.Process.Pid
			ran, delay := m.backoff.ran(), m.backoff.died()
			why := ""
			if m.cmd.ProcessState.ExitCode() >= 0 { // it exited, was not killed: say why
				why = lastLogLine(m.log)
			}
			m.cmd = nil
			sv.report("%s (pid %d) died after %s: %v; restarting in %v%s", m, pid, ran.Round(time.Millisecond), ev.err, delay, why)
			sv.writePids()
			sv.after(m, delay)
		case m := <-sv.restart:
			if err := sv.start(m); err != nil {
				delay := m.backoff.startFailed()
				sv.report("%v; trying again in %v", err, delay)
				sv.after(m, delay)
				continue
			}
			sv.report("%s restarted (pid %d)", m, m.cmd.Process.Pid)
		}
	}
}

// after schedules m's restart after delay.
func (sv *supervisor) after(m *member, delay time.Duration) {
	time.AfterFunc(delay, func() {
		select {
		case sv.restart <- m:
		case <-sv.done:
		}
	})
}

// stop stops every member with SIGTERM, and SIGKILL for those still
// running after 20 seconds: first the mount and the task servers (clients
// of the others); the mount unmounts and commits
// what its open files hold (it needs the namenode and datanodes for that),
// then the datanodes and the namenode.
func (sv *supervisor) stop() {
	close(sv.done)
	sv.stopMembers(func(m *member) bool { return m.kind == "mount" || m.kind == "taskserver" })
	sv.stopMembers(func(m *member) bool { return m.kind != "mount" && m.kind != "taskserver" })
	for _, m := range sv.members {
		if m.cleanup != nil {
			m.cleanup()
		}
	}
	os.Remove(filepath.Join(sv.dir, "pids"))
}

// stopMembers stops the running members that which selects, datanodes
// before the namenode, and waits for them.
func (sv *supervisor) stopMembers(which func(*member) bool) {
	running := 0
	for i := len(sv.members) - 1; i >= 0; i-- {
		if m := sv.members[i]; m.cmd != nil && which(m) {
			m.cmd.Process.Signal(syscall.SIGTERM)
			running++
		}
	}
	kill := time.After(20 * time.Second)
	for running > 0 {
		select {
		case ev := <-sv.exits:
			ev.m.cmd = nil
			if which(ev.m) {
				running--
			}
		case <-kill:
			for _, m := range sv.members {
				if m.cmd != nil && which(m) {
					sv.report("%s (pid %d) did not stop within 20s; killing it", m, m.cmd.Process.Pid)
					m.cmd.Process.Kill()
				}
			}
		}
	}
}

// startMount adds the FUSE mount of the cluster at mp as a member, run as
// 'plasma mount' with the cluster's client configuration, and waits until
// it is mounted. The mountpoint is recorded in the cluster directory so
// that 'cluster down' can clear a mount whose process died.
func (sv *supervisor) startMount(ctx context.Context, mp, opts, cluster string) error {
	args := []string{"mount", "-cluster", cluster}
	if opts != "" {
		args = append(args, "-o", opts)
	}
	m := sv.add("mount", "mount", append(args, mp))
	// The cluster's own configuration, whatever the environment names.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PLASMAFS_") {
			m.env = append(m.env, kv)
		}
	}
	m.env = append(m.env, "PLASMAFS_CONFIG="+filepath.Join(sv.dir, "client.conf"))
	m.ready = make(chan string, 1)
	m.prestart = func() error { return clearStaleMount(mp) }
	m.cleanup = func() {
		if err := clearStaleMount(mp); err != nil {
			sv.report("%v", err)
		}
		os.Remove(filepath.Join(sv.dir, "mountpoint"))
	}
	if err := writePrivate(filepath.Join(sv.dir, "mountpoint"), []byte(mp+"\n")); err != nil {
		return err
	}
	if err := sv.start(m); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case ev := <-sv.exits:
		return sv.exited(ev)
	case msg := <-m.ready:
		if msg != "ok" {
			return fmt.Errorf("mount %s: %s (see %s)", mp, msg, m.log)
		}
	}
	return nil
}

// plasmaMountType returns the filesystem type of a FUSE mount of PlasmaFS
// at mp ("fuse.plasma"), or "" if mp is not one; other is the type of
// another kind of mount there.
func plasmaMountType(mp string) (plasma bool, other string) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false, ""
	}
	unescape := strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`)
	for _, l := range strings.Split(string(b), "\n") {
		// id parent major:minor root mountpoint options [optional...] - fstype source superopts
		f := strings.Fields(l)
		if len(f) < 5 || unescape.Replace(f[4]) != mp {
			continue
		}
		fstype := ""
		for i := 5; i+1 < len(f); i++ {
			if f[i] == "-" {
				fstype = f[i+1]
				break
			}
		}
		plasma, other = fstype == "fuse.plasma", fstype // the last mount on mp is the visible one
	}
	if plasma {
		other = ""
	}
	return plasma, other
}

// clearStaleMount detaches a FUSE mount of PlasmaFS at mp whose process
// ended (its calls fail with ENOTCONN). A working mount, or another kind
// of mount, at mp is an error: it is not the cluster's to remove.
func clearStaleMount(mp string) error {
	plasma, other := plasmaMountType(mp)
	if other != "" {
		return fmt.Errorf("%s is already a mountpoint (%s)", mp, other)
	}
	if !plasma {
		return nil
	}
	if _, err := os.Stat(mp); err == nil {
		return fmt.Errorf("%s is already mounted (a PlasmaFS mount that works; 'plasma umount %s')", mp, mp)
	} else if !errors.Is(err, syscall.ENOTCONN) {
		return fmt.Errorf("%s: %w", mp, err)
	}
	if err := syscall.Unmount(mp, syscall.MNT_DETACH); err != nil {
		return fmt.Errorf("clear the stale mount at %s: %w", mp, err)
	}
	return nil
}

// lastLogLine returns ": " and the last line of a log file, or "".
func lastLogLine(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	buf := make([]byte, 4096)
	st, err := f.Stat()
	if err != nil {
		return ""
	}
	off := max(0, st.Size()-int64(len(buf)))
	k, _ := f.ReadAt(buf, off)
	lines := strings.Split(strings.TrimSpace(string(buf[:k])), "\n")
	last := strings.TrimSpace(lines[len(lines)-1])
	if last == "" {
		return ""
	}
	if len(last) > 300 {
		last = last[:300] + "..."
	}
	return " (last log line: " + escapeText(last) + ")"
}

// writePrivate writes a file readable by its owner only, replacing an
// existing one (whatever its permissions were) atomically; a symbolic link
// (such as a ~/.plasmafs kept elsewhere) stays, its target is replaced.
func writePrivate(path string, data []byte) error {
	if target, err := filepath.EvalSymlinks(path); err == nil {
		path = target
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// tightenPermissions makes the secrets (0700/0600), database, logs and
// client configuration of a cluster directory created by an older version
// private to their owner.
func tightenPermissions(dir string) {
	tighten := func(p string, allowed fs.FileMode) {
		st, err := os.Lstat(p)
		if err != nil || st.Mode()&fs.ModeSymlink != 0 {
			return
		}
		if perm := st.Mode().Perm(); perm&^allowed != 0 {
			if os.Chmod(p, perm&allowed) == nil {
				fmt.Fprintf(stdout, "permissions of %s tightened from %04o to %04o\n", p, perm, perm&allowed)
			}
		}
	}
	tighten(dir, 0o750)
	secDir := filepath.Join(dir, "secrets")
	tighten(secDir, 0o700)
	if ents, err := os.ReadDir(secDir); err == nil {
		for _, e := range ents {
			tighten(filepath.Join(secDir, e.Name()), 0o600)
		}
	}
	names := []string{"client.conf", "pids"}
	if ms, err := filepath.Glob(filepath.Join(dir, "namenode.db*")); err == nil {
		names = append(names, ms...)
	}
	if ms, err := filepath.Glob(filepath.Join(dir, "*.log")); err == nil {
		names = append(names, ms...)
	}
	for _, n := range names {
		if !filepath.IsAbs(n) && !strings.HasPrefix(n, dir) {
			n = filepath.Join(dir, n)
		}
		tighten(n, 0o640)
	}
}

func (sv *supervisor) waitListening(ctx context.Context, addr string) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case ev := <-sv.exits:
			return sv.exited(ev)
		case <-time.After(20 * time.Millisecond):
		}
	}
	return errors.New("timed out")
}

func (sv *supervisor) waitDatanodes(ctx context.Context, cfg client.Config, n int) error {
	c, err := client.New(ctx, cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		s, err := c.FsStat(ctx)
		if err != nil {
			return err
		}
		if int(s.LiveDatanodes) >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case ev := <-sv.exits:
			return sv.exited(ev)
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("only some of %d datanodes registered in time", n)
}

// A pidEntry is one line of a cluster directory's pids file: supervisor,
// namenode or dnN, and the process id ("" for files of older versions,
// which held the namenode's and then the datanodes' ids).
type pidEntry struct {
	role string
	pid  int
}

func readPids(dir string) ([]pidEntry, error) {
	b, err := os.ReadFile(filepath.Join(dir, "pids"))
	if err != nil {
		return nil, err
	}
	var out []pidEntry
	for _, l := range strings.Split(string(b), "\n") {
		fs := strings.Fields(l)
		var e pidEntry
		switch len(fs) {
		case 1:
			e.pid, err = strconv.Atoi(fs[0])
		case 2:
			e.role = fs[0]
			e.pid, err = strconv.Atoi(fs[1])
		default:
			continue
		}
		if err == nil && e.pid > 0 {
			out = append(out, e)
		}
	}
	return out, nil
}

// alive reports whether process pid exists, a zombie included.
func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// running reports whether process pid runs: a zombie (a member that ended
// after its parent, the supervisor, was killed, until init reaps it) does
// not.
func running(pid int) bool {
	if !alive(pid) {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// pid (comm) state ...: comm may hold spaces and parentheses.
	if i := strings.LastIndexByte(string(b), ')'); i >= 0 && i+2 < len(b) {
		return b[i+2] != 'Z'
	}
	return true
}

func anyAlive(pids []pidEntry) bool {
	for _, p := range pids {
		if alive(p.pid) {
			return true
		}
	}
	return false
}

func anyRunning(pids []pidEntry) bool {
	for _, p := range pids {
		if running(p.pid) {
			return true
		}
	}
	return false
}

func cmdClusterDown(ctx context.Context, args []string) error {
	f := newFlags("cluster down", "[-dir DIR]", "Stop a local cluster started with 'plasma cluster up' (with or without -detach).", false)
	dir := f.String("dir", defaultClusterDir(), "cluster directory")
	if err := f.parse(args); err != nil {
		return err
	}
	if len(f.pos) != 0 {
		return usagef("unexpected argument %q", f.pos[0])
	}
	pids, err := readPids(*dir)
	if err != nil {
		return fmt.Errorf("no running cluster recorded in %s: %w", *dir, err)
	}
	// The supervisor stops its members (and restarts none); without one,
	// datanodes first, then the namenode.
	supervised := false
	for _, p := range pids {
		if p.role == "supervisor" && running(p.pid) {
			supervised = syscall.Kill(p.pid, syscall.SIGTERM) == nil
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	if !supervised {
		// The mount first, waited for: it commits what its open files
		// hold, which needs the namenode and datanodes.
		var mounts []pidEntry
		for _, p := range pids {
			if p.role == "mount" && syscall.Kill(p.pid, syscall.SIGTERM) == nil {
				mounts = append(mounts, p)
			}
		}
		for anyRunning(mounts) && time.Now().Before(deadline) {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(50 * time.Millisecond):
			}
		}
		for i := len(pids) - 1; i >= 0; i-- {
			syscall.Kill(pids[i].pid, syscall.SIGTERM)
		}
	}
	for anyRunning(pids) && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	if anyRunning(pids) {
		var left []int
		for _, p := range pids {
			if running(p.pid) {
				left = append(left, p.pid)
			}
		}
		return fmt.Errorf("cluster processes %v did not stop within 60s", left)
	}
	// Members whose parent was killed are reaped by init, which can take
	// a moment: give it that, so that they are gone from the process
	// table too.
	for grace := time.Now().Add(5 * time.Second); anyAlive(pids) && time.Now().Before(grace); {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	os.Remove(filepath.Join(*dir, "pids"))
	// The supervisor unmounts the cluster's mount; if it or the mount
	// process was killed, the mount is left stale: clear it.
	if b, err := os.ReadFile(filepath.Join(*dir, "mountpoint")); err == nil {
		if mp := strings.TrimSpace(string(b)); mp != "" {
			if plasma, _ := plasmaMountType(mp); plasma {
				if err := clearStaleMount(mp); err != nil {
					return err
				}
			}
		}
		os.Remove(filepath.Join(*dir, "mountpoint"))
	}
	fmt.Fprintf(stdout, "cluster in %s stopped\n", *dir)
	return nil
}
