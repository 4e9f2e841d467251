package clustertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/auth"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// Binary returns the path of the plasma binary: $PLASMA_BIN, or one built
// once per test process from this module (with plasma-bench beside it, so
// that 'plasma bench' finds it).
func Binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		if p := os.Getenv("PLASMA_BIN"); p != "" {
			binPath = p
			return
		}
		var dir string
		if dir, buildErr = os.MkdirTemp("", "plasma-bin-"); buildErr != nil {
			return
		}
		binPath = filepath.Join(dir, "plasma")
		buildErr = goBuild(binPath, "./cmd/plasma")
		if buildErr == nil {
			buildErr = goBuild(filepath.Join(dir, "plasma-bench"), "./cmd/plasma-bench")
		}
	})
	if buildErr != nil {
		t.Fatalf("build plasma: %v", buildErr)
	}
	return binPath
}

// BenchBinary returns the path of the plasma-bench binary:
// $PLASMA_BENCH_BIN, or the one beside Binary's plasma (make build and
// Binary put it there).
func BenchBinary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("PLASMA_BENCH_BIN"); p != "" {
		return p
	}
	p := filepath.Join(filepath.Dir(Binary(t)), "plasma-bench")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("no plasma-bench beside %s (make build builds both; or set PLASMA_BENCH_BIN): %v", Binary(t), err)
	}
	return p
}

// goBuild builds package pkg of this module into out.
func goBuild(out, pkg string) error {
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return err
	}
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = filepath.Dir(strings.TrimSpace(string(gomod)))
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %v\n%s", pkg, err, b)
	}
	return nil
}

// Proc is one daemon process.
type Proc struct {
	Addr string
	// AdminAddr is its admin port (Options.Admin), or "".
	AdminAddr string
	Dir       string
	Log       string
	cmd       *exec.Cmd
	done      chan struct{}
}

// Pid returns the process id (0 if not started).
func (p *Proc) Pid() int {
	if p == nil || p.cmd == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Running reports whether the process is running.
func (p *Proc) Running() bool {
	if p == nil || p.cmd == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Procs is a cluster of real plasma processes.
type Procs struct {
	t       testing.TB
	Opts    Options
	Dir     string
	Bin     string
	NN      *Proc
	DNs     []*Proc
	Secrets *auth.Secrets
	// AdminCred is a superuser credential file for clients.
	AdminCred string
}

// Start starts a namenode and o.Datanodes datanodes as separate processes
// and waits until every datanode is registered.
func Start(t testing.TB, o Options) *Procs {
	t.Helper()
	o.defaults()
	c := &Procs{t: t, Opts: o, Dir: t.TempDir(), Bin: Binary(t)}
	c.NN = &Proc{Addr: FreeAddr(t), Dir: c.Dir, Log: filepath.Join(c.Dir, "namenode.log")}
	if o.Admin {
		c.NN.AdminAddr = FreeAddr(t)
	}
	var err error
	if c.Secrets, err = auth.InitSecrets(filepath.Join(c.Dir, "secrets"), o.Cluster); err != nil {
		t.Fatalf("secrets: %v", err)
	}
	c.AdminCred = c.IssueCredential("admin", auth.RoleSuperuser)
	t.Cleanup(c.stopAll)
	c.StartNamenode()
	for i := 0; i < o.Datanodes; i++ {
		c.AddDatanode()
	}
	c.WaitLive(o.Datanodes)
	return c
}

func (c *Procs) stopAll() {
	if c.t.Failed() {
		for _, p := range append([]*Proc{c.NN}, c.DNs...) {
			c.t.Logf("log of %s:\n%s", p.Log, c.ReadLog(p))
		}
	}
	for _, p := range append([]*Proc{c.NN}, c.DNs...) {
		if p.Running() {
			p.cmd.Process.Kill()
			<-p.done
		}
	}
}

func (c *Procs) start(p *Proc, args ...string) {
	c.t.Helper()
	lf, err := os.OpenFile(p.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		c.t.Fatalf("log: %v", err)
	}
	fdLimit := c.Opts.DatanodeFDLimit
	if p == c.NN {
		fdLimit = c.Opts.NamenodeFDLimit
	}
	cmd := LimitFiles(fdLimit, c.Bin, args...)
	cmd.Stdout, cmd.Stderr = lf, lf
	if err := cmd.Start(); err != nil {
		c.t.Fatalf("start %v: %v", args, err)
	}
	lf.Close()
	p.cmd = cmd
	p.done = make(chan struct{})
	go func() { cmd.Wait(); close(p.done) }()
}

// LimitFiles returns the command running bin with args, limited to
// nofile open files if nofile > 0 (prlimit execs bin, which keeps its
// process id).
func LimitFiles(nofile int, bin string, args ...string) *exec.Cmd {
	if nofile <= 0 {
		return exec.Command(bin, args...)
	}
	lim := fmt.Sprintf("--nofile=%d:%d", nofile, nofile)
	return exec.Command("prlimit", append([]string{lim, "--", bin}, args...)...)
}

// StartNamenode (re)starts the namenode on its address and database. The
// first start formats a new namespace (-format); later ones open it.
func (c *Procs) StartNamenode() {
	c.t.Helper()
	first := c.NN.cmd == nil
	args := []string{"namenode", "-listen", c.NN.Addr, "-db", filepath.Join(c.Dir, "namenode.db"), "-cluster", c.Opts.Cluster,
		"-blocksize", strconv.FormatInt(c.Opts.Blocksize, 10), "-log-level", "warn",
		"-security", c.Opts.Security, "-data-security", c.Opts.DataSecurity, "-credential", c.IssueCredential("namenode", auth.RoleNamenode), "-ticket-key", c.TicketKeyFile(),
		"-delegation-credential", c.delegationFile()}
	if c.Opts.Relaxed {
		args = append(args, "-relaxed")
	}
	// Only the first start formats (a restart on a missing database must
	// fail as it would for an operator; a test that wants a new namespace
	// passes -format in NamenodeArgs). The database may be elsewhere
	// (NamenodeArgs -db), so its existence decides nothing here.
	if first {
		args = append(args, "-format")
	}
	args = append(args, c.Opts.NamenodeArgs...)
	args = append(args, adminArgs(c.NN)...)
	c.start(c.NN, args...)
	c.waitListening(c.NN)
}

func (c *Procs) waitListening(p *Proc) {
	c.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if conn, err := net.DialTimeout("tcp", p.Addr, time.Second); err == nil {
			conn.Close()
			return
		}
		select {
		case <-p.done:
			c.t.Fatalf("process exited during start-up:\n%s", c.ReadLog(p))
		case <-time.After(10 * time.Millisecond):
		}
	}
	c.t.Fatalf("%s not listening after 60s:\n%s", p.Addr, c.ReadLog(p))
}

// ReadLog returns a process's log.
func (c *Procs) ReadLog(p *Proc) string {
	b, _ := os.ReadFile(p.Log)
	return string(b)
}

// InitVolume creates a datanode volume with the given cluster and
// blocksize and returns its directory.
func (c *Procs) InitVolume(cluster string, blocksize, size int64) string {
	c.t.Helper()
	dir := filepath.Join(c.Dir, fmt.Sprintf("vol%d", time.Now().UnixNano()))
	args := append([]string{"datanode", "init"}, c.Opts.initLayoutArgs()...)
	out, code := c.Run(nil, append(args, "-dir", dir, "-cluster", cluster, "-blocksize", strconv.FormatInt(blocksize, 10), "-size", strconv.FormatInt(size, 10))...)
	if code != 0 {
		c.t.Fatalf("datanode init: %s", out)
	}
	return dir
}

// AddDatanode initialises and starts a new datanode.
func (c *Procs) AddDatanode() *Proc {
	c.t.Helper()
	dir := c.InitVolume(c.Opts.Cluster, c.Opts.Blocksize, c.Opts.Size)
	p := &Proc{Addr: FreeAddr(c.t), Dir: dir, Log: dir + ".log"}
	if c.Opts.Admin {
		p.AdminAddr = FreeAddr(c.t)
	}
	c.DNs = append(c.DNs, p)
	c.StartDatanode(p)
	return p
}

// StartDatanode (re)starts a datanode process on its volume and address.
func (c *Procs) StartDatanode(p *Proc) {
	c.t.Helper()
	args := []string{"datanode", "-dir", p.Dir, "-listen", p.Addr, "-namenode", c.NN.Addr, "-heartbeat", "100ms", "-log-level", "warn",
		"-security", c.Opts.DataSecurity, "-namenode-security", c.Opts.Security, "-credential", c.IssueCredential("datanode", auth.RoleDatanode)}
	if c.Opts.DataSecurity != "none" {
		args = append(args, "-ticket-key", c.TicketKeyFile())
	}
	args = append(args, c.Opts.DatanodeArgs...)
	args = append(args, adminArgs(p)...)
	c.start(p, args...)
}

// Kill kills a process with SIGKILL and waits for it to be gone.
func (c *Procs) Kill(p *Proc) {
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// Stop freezes a process with SIGSTOP (it keeps its sockets; nothing it
// receives is processed until it is killed).
func (c *Procs) Stop(p *Proc) {
	p.cmd.Process.Signal(syscall.SIGSTOP)
}

// Continue resumes a process frozen by Stop.
func (c *Procs) Continue(p *Proc) {
	p.cmd.Process.Signal(syscall.SIGCONT)
}

// Wait waits for a process to exit and returns its exit code.
func (c *Procs) Wait(p *Proc) int {
	<-p.done
	return p.cmd.ProcessState.ExitCode()
}

// WaitLive waits until the namenode reports n live datanodes.
func (c *Procs) WaitLive(n int) {
	c.t.Helper()
	cl := c.Client(client.Config{})
	defer cl.Close()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		s, err := cl.FsStat(context.Background())
		if err == nil && int(s.LiveDatanodes) == n {
			return
		}
		time.Sleep(20 * time.Millisecond) // polling a condition, not timing a test
	}
	c.t.Fatalf("namenode does not report %d live datanodes after 60s", n)
}

// IssueCredential writes a credential for name with role and returns its
// file.
func (c *Procs) IssueCredential(name string, role auth.Role, groups ...string) string {
	c.t.Helper()
	p := filepath.Join(c.Dir, "secrets", fmt.Sprintf("%s-%s.pem", name, role))
	if _, err := os.Stat(p); err == nil && len(groups) == 0 {
		return p
	}
	cred, err := c.Secrets.Issue(name, role, groups)
	if err != nil {
		c.t.Fatalf("issue credential: %v", err)
	}
	if err := os.WriteFile(p, cred.PEM(), 0o600); err != nil {
		c.t.Fatal(err)
	}
	return p
}

// delegationFile writes the namenode's delegation certificate (once) and
// returns its file.
func (c *Procs) delegationFile() string {
	c.t.Helper()
	p := filepath.Join(c.Dir, "secrets", "delegation.pem")
	if _, err := os.Stat(p); err == nil {
		return p
	}
	cred, err := c.Secrets.IssueDelegator()
	if err != nil {
		c.t.Fatalf("delegation certificate: %v", err)
	}
	if err := os.WriteFile(p, cred.PEM(), 0o600); err != nil {
		c.t.Fatal(err)
	}
	return p
}

// TicketKeyFile is the file holding the cluster's ticket key.
func (c *Procs) TicketKeyFile() string { return filepath.Join(c.Dir, "secrets", "ticket.key") }

// Client connects a client (cfg's Namenodes default to the namenode's
// address; security defaults to the cluster's, with the superuser
// credential).
func (c *Procs) Client(cfg client.Config) *client.Client {
	c.t.Helper()
	if len(cfg.Namenodes) == 0 {
		cfg.Namenodes = []string{c.NN.Addr}
	}
	if cfg.Security == "" {
		cfg.Security = c.Opts.Security
	}
	if cfg.DataSecurity == "" {
		cfg.DataSecurity = c.Opts.DataSecurity
	}
	if cfg.CredentialFile == "" {
		cfg.CredentialFile = c.AdminCred
	}
	cl, err := client.New(context.Background(), cfg)
	if err != nil {
		c.t.Fatalf("client: %v", err)
	}
	return cl
}

// Env is the environment for plasma client commands against this cluster.
func (c *Procs) Env() []string {
	return append(os.Environ(), "PLASMAFS_NAMENODES="+c.NN.Addr, "PLASMAFS_CONFIG="+filepath.Join(c.Dir, "no-config"),
		"PLASMAFS_SECURITY="+c.Opts.Security, "PLASMAFS_DATA_SECURITY="+c.Opts.DataSecurity, "PLASMAFS_CREDENTIAL="+c.AdminCred)
}

// Run runs a plasma command and returns its combined output and exit code.
// stdin may be nil.
func (c *Procs) Run(stdin []byte, args ...string) (string, int) {
	c.t.Helper()
	return c.RunEnv(nil, stdin, args...)
}

// RunEnv is Run with extra environment variables (e.g. another
// PLASMAFS_CREDENTIAL).
func (c *Procs) RunEnv(env []string, stdin []byte, args ...string) (string, int) {
	c.t.Helper()
	cmd := exec.Command(c.Bin, args...)
	cmd.Env = append(c.Env(), env...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		c.t.Fatalf("run plasma %v: %v", args, err)
	}
	return out.String(), cmd.ProcessState.ExitCode()
}

// MustRun runs a plasma command that must succeed and returns its stdout
// and stderr together.
func (c *Procs) MustRun(args ...string) string {
	c.t.Helper()
	out, code := c.Run(nil, args...)
	if code != 0 {
		c.t.Fatalf("plasma %s: exit %d:\n%s", strings.Join(args, " "), code, out)
	}
	return out
}

// adminArgs are the flags giving p its admin port, if it has one.
func adminArgs(p *Proc) []string {
	if p.AdminAddr == "" {
		return nil
	}
	return []string{"-admin-listen", p.AdminAddr}
}
