package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/plasmafs/plasma/internal/loopback"
	"github.com/plasmafs/plasma/internal/supervisor"
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

// freePort returns a loopback address with a port nobody listens on now,
// below the kernel's ephemeral range (cluster up picks every member's
// ports before it starts them).
func freePort() (string, error) { return loopback.FreeAddr() }

// envSupervisor is set for the background supervisor that 'cluster up
// -detach' starts; it reports readiness on file descriptor 3.
const envSupervisor = "PLASMA_CLUSTER_SUPERVISOR"

func cmdClusterUp(ctx context.Context, args []string) error {
	u, err := parseClusterUp(args)
	if err != nil {
		return err
	}
	var ready *os.File // the detaching parent's readiness pipe
	if os.Getenv(envSupervisor) != "" {
		syscall.CloseOnExec(3) // not for the members
		ready = os.NewFile(3, "ready")
		os.Unsetenv(envSupervisor)
	}
	if err := u.prepareDir(); err != nil {
		return err
	}
	if u.detach && ready == nil {
		return startSupervisor(ctx, args)
	}
	// The cluster's PostgreSQL server, if any, stops with the cluster.
	defer u.stopStore()
	if err := u.createVolumes(ctx); err != nil {
		return err
	}
	if err := u.loadCredentials(); err != nil {
		return err
	}
	if err := u.chooseAddrs(); err != nil {
		return err
	}
	sv, err := u.newSupervisor()
	if err != nil {
		return err
	}
	if err := u.startMembers(ctx, sv); err != nil {
		sv.Stop()
		return err
	}
	if ready != nil {
		if err := u.handOverOutput(sv, ready); err != nil {
			sv.Stop()
			return err
		}
	} else {
		fmt.Fprintf(stdout, "members that die are restarted; press Ctrl-C (or run 'plasma cluster down -dir %s') to stop\n", u.dir)
		// Closing the terminal stops the cluster too.
		var stop context.CancelFunc
		ctx, stop = signal.NotifyContext(ctx, syscall.SIGHUP)
		defer stop()
	}
	return sv.Supervise(ctx)
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

// startMount adds the FUSE mount of the cluster at mp as a member, run as
// 'plasma mount' with the cluster's client configuration, and waits until
// it is mounted. The mountpoint is recorded in the cluster directory so
// that 'cluster down' can clear a mount whose process died.
func startMount(ctx context.Context, sv *supervisor.Supervisor, mp, opts, cluster string) error {
	args := []string{"mount", "-cluster", cluster}
	if opts != "" {
		args = append(args, "-o", opts)
	}
	m := sv.Add("mount", "mount", append(args, mp))
	m.Env = clusterMemberEnv(sv.Dir(), "PLASMAFS_")
	m.Ready, m.ReadyEnv = make(chan string, 1), mountReadyFD
	m.Prestart = func() error { return clearStaleMount(mp) }
	m.Cleanup = func() {
		if err := clearStaleMount(mp); err != nil {
			sv.Report("%v", err)
		}
		os.Remove(filepath.Join(sv.Dir(), "mountpoint"))
	}
	if err := writePrivate(filepath.Join(sv.Dir(), "mountpoint"), []byte(mp+"\n")); err != nil {
		return err
	}
	if err := sv.Start(m); err != nil {
		return err
	}
	msg, err := sv.AwaitReady(ctx, m)
	if err != nil {
		return err
	}
	if msg != "ok" {
		return fmt.Errorf("mount %s: %s (see %s)", mp, msg, m.Log)
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

// writePrivate writes a file readable by its owner only (the
// supervisor's pids file is one).
var writePrivate = supervisor.WritePrivate

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
	if err := stopClusterPostgres(*dir); err != nil {
		return err
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
