// Package supervisor runs the processes of a local cluster ('plasma
// cluster up'): it starts each member, restarts one that dies after a
// delay that grows while it keeps dying soon after its start (RestartPolicy),
// records their process ids for 'cluster down', and stops them all in
// order.
package supervisor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/plasmafs/plasma/client"
)

// New makes the supervisor of the members of the cluster in dir, which
// run the program self (with each member's arguments), restarted under
// policy; it reports to out, with log lines rendered by escape.
func New(self, dir string, policy RestartPolicy, out io.Writer, escape func(string) string) *Supervisor {
	return &Supervisor{self: self, dir: dir, policy: policy, out: out, escape: escape,
		exits: make(chan exitEvent, 130), restart: make(chan *Member), done: make(chan struct{})}
}

// Dir is the cluster's directory.
func (sv *Supervisor) Dir() string { return sv.dir }

// AwaitReady waits until member m reports on its readiness descriptor
// and returns what it said; a member that ends first is an error.
func (sv *Supervisor) AwaitReady(ctx context.Context, m *Member) (string, error) {
	select {
	case <-ctx.Done():
		return "", ctx.Err()
	case ev := <-sv.exits:
		return "", sv.exited(ev)
	case msg := <-m.Ready:
		return msg, nil
	}
}

// A Member is one process of the cluster.
type Member struct {
	Name string // dn1, namenode, mount
	Kind string // datanode, namenode, mount
	Log  string
	Args []string
	Env  []string  // nil: the supervisor's
	cmd  *exec.Cmd // nil while not running
	// backoff says when it started and how long to wait before its
	// next restart.
	backoff *restartBackoff
	// For the mount: Prestart clears a stale mount before each start;
	// Ready receives what the mount process reports on its readiness
	// descriptor ("ok" or why it failed), whose number (3) the process
	// finds in its environment variable ReadyEnv; Cleanup unmounts what
	// is left once the member has stopped.
	Prestart func() error
	Ready    chan string
	ReadyEnv string
	Cleanup  func()
}

func (m *Member) String() string {
	if m.Kind == m.Name {
		return m.Name
	}
	return m.Kind + " " + m.Name
}

type exitEvent struct {
	m   *Member
	err error
}

// Supervisor starts the cluster's members and restarts those that die.
type Supervisor struct {
	self    string
	dir     string
	policy  RestartPolicy
	out     io.Writer             // where Report writes
	escape  func(s string) string // renders a log line for a terminal
	members []*Member
	exits   chan exitEvent // a member's process ended
	restart chan *Member   // a member's backoff is over
	done    chan struct{}  // closed when stopping: no more restarts

	// MemberArgs, if set, completes a member's arguments when it is added
	// (cluster up gives each member its admin port this way).
	MemberArgs func(name, kind string, args []string) []string
}

// Add adds a member (not started yet) whose log is DIR/NAME.log.
func (sv *Supervisor) Add(name, kind string, args []string) *Member {
	if sv.MemberArgs != nil {
		args = sv.MemberArgs(name, kind, args)
	}
	m := &Member{Name: name, Kind: kind, Log: filepath.Join(sv.dir, name+".log"), Args: args, backoff: newRestartBackoff(sv.policy, time.Now)}
	sv.members = append(sv.members, m)
	return m
}

// Report writes a line about the cluster, with the time.
func (sv *Supervisor) Report(format string, args ...any) {
	fmt.Fprintf(sv.out, "%s plasma cluster: %s\n", time.Now().Format("2006-01-02 15:04:05"), fmt.Sprintf(format, args...))
}

// Start starts m's process; its end arrives on sv.exits.
func (sv *Supervisor) Start(m *Member) error {
	lf, err := os.OpenFile(m.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer lf.Close()
	if m.Prestart != nil {
		if err := m.Prestart(); err != nil {
			return fmt.Errorf("start %s: %w", m, err)
		}
	}
	cmd := exec.Command(sv.self, m.Args...)
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.Env = m.Env
	if m.Ready != nil {
		r, w, err := os.Pipe()
		if err != nil {
			return err
		}
		defer w.Close()
		cmd.ExtraFiles = []*os.File{w}
		cmd.Env = append(cmd.Env, m.ReadyEnv+"=3")
		go func() {
			msg, _ := io.ReadAll(r)
			r.Close()
			select {
			case m.Ready <- string(msg):
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
func (sv *Supervisor) writePids() error {
	lines := []string{fmt.Sprintf("supervisor %d", os.Getpid())}
	for _, m := range sv.members {
		if m.cmd != nil {
			lines = append(lines, fmt.Sprintf("%s %d", m.Name, m.cmd.Process.Pid))
		}
	}
	return WritePrivate(filepath.Join(sv.dir, "pids"), []byte(strings.Join(lines, "\n")+"\n"))
}

// exited handles a member's end during start-up and returns it as an error.
func (sv *Supervisor) exited(ev exitEvent) error {
	ev.m.cmd = nil
	return fmt.Errorf("%s exited during start-up (%v)%s", ev.m, ev.err, sv.lastLogLine(ev.m.Log))
}

// Supervise restarts members that die until ctx ends, then stops them all.
func (sv *Supervisor) Supervise(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			sv.Report("stopping cluster")
			sv.Stop()
			sv.Report("cluster stopped")
			return nil
		case ev := <-sv.exits:
			m := ev.m
			pid := m.cmd.Process.Pid
			ran, delay := m.backoff.ran(), m.backoff.died()
			why := ""
			if m.cmd.ProcessState.ExitCode() >= 0 { // it exited, was not killed: say why
				why = sv.lastLogLine(m.Log)
			}
			m.cmd = nil
			sv.Report("%s (pid %d) died after %s: %v; restarting in %v%s", m, pid, ran.Round(time.Millisecond), ev.err, delay, why)
			sv.writePids()
			sv.after(m, delay)
		case m := <-sv.restart:
			if err := sv.Start(m); err != nil {
				delay := m.backoff.startFailed()
				sv.Report("%v; trying again in %v", err, delay)
				sv.after(m, delay)
				continue
			}
			sv.Report("%s restarted (pid %d)", m, m.cmd.Process.Pid)
		}
	}
}

// after schedules m's restart after delay.
func (sv *Supervisor) after(m *Member, delay time.Duration) {
	time.AfterFunc(delay, func() {
		select {
		case sv.restart <- m:
		case <-sv.done:
		}
	})
}

// Stop stops every member with SIGTERM, and SIGKILL for those still
// running after 20 seconds: first the mount and the task servers (clients
// of the others); the mount unmounts and commits
// what its open files hold (it needs the namenode and datanodes for that),
// then the datanodes and the namenode.
func (sv *Supervisor) Stop() {
	close(sv.done)
	sv.stopMembers(func(m *Member) bool { return m.Kind == "mount" || m.Kind == "taskserver" })
	sv.stopMembers(func(m *Member) bool { return m.Kind != "mount" && m.Kind != "taskserver" })
	for _, m := range sv.members {
		if m.Cleanup != nil {
			m.Cleanup()
		}
	}
	os.Remove(filepath.Join(sv.dir, "pids"))
}

// stopMembers stops the running members that which selects, datanodes
// before the namenode, and waits for them.
func (sv *Supervisor) stopMembers(which func(*Member) bool) {
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
					sv.Report("%s (pid %d) did not stop within 20s; killing it", m, m.cmd.Process.Pid)
					m.cmd.Process.Kill()
				}
			}
		}
	}
}

// WaitListening waits until something listens at addr (or a member ends).
func (sv *Supervisor) WaitListening(ctx context.Context, addr string) error {
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

// WaitDatanodes waits until n datanodes registered with the namenode of
// cfg (or a member ends).
func (sv *Supervisor) WaitDatanodes(ctx context.Context, cfg client.Config, n int) error {
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

// lastLogLine returns ": " and the last line of a log file, or "".
func (sv *Supervisor) lastLogLine(path string) string {
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
	return " (last log line: " + sv.escape(last) + ")"
}

// WritePrivate writes a file readable by its owner only, replacing an
// existing one (whatever its permissions were) atomically; a symbolic link
// (such as a ~/.plasmafs kept elsewhere) stays, its target is replaced.
func WritePrivate(path string, data []byte) error {
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
