package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/auth"
)

func init() {
	register("cluster up", "[-datanodes N] [-dir DIR] [-blocksize B] [-size BYTES] [-detach]", "start a local cluster (namenode + N datanodes)", cmdClusterUp)
	register("cluster down", "[-dir DIR]", "stop a local cluster started with -detach", cmdClusterDown)
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

func cmdClusterUp(ctx context.Context, args []string) error {
	f := newFlags("cluster up", "[options]", "Start a namenode (SQLite) and N datanodes on 127.0.0.1 as separate processes,\nwrite the client configuration, and stop everything on Ctrl-C (or 'plasma cluster down' with -detach).", false)
	n := f.Int("datanodes", 2, "number of datanodes")
	dir := f.String("dir", defaultClusterDir(), "directory for the database, volumes and logs")
	name := f.String("cluster", "local", "cluster name")
	var bs int64 = 1 << 20
	var size int64 = 4 << 30
	f.Var(sizeFlag{&bs}, "blocksize", "blocksize of a new cluster")
	f.Var(sizeFlag{&size}, "size", "size of each new datanode volume")
	nnAddr := f.String("namenode-addr", "", "namenode address (default: a free port)")
	detach := f.Bool("detach", false, "start in the background and return")
	relaxed := f.Bool("relaxed", false, "relaxed commit mode (acknowledge before fsync)")
	writeCfg := f.Bool("write-config", true, "write the client configuration ("+client.ConfigFile()+")")
	secFlag := f.String("security", "privacy", "namenode traffic security: none, auth or privacy")
	dataSecFlag := f.String("data-security", "auth", "datanode traffic security: none, auth or privacy")
	if err := f.parse(args); err != nil {
		return err
	}
	if *n < 1 || *n > 64 {
		return usagef("-datanodes %d: must be 1..64", *n)
	}
	if _, err := auth.ParseLevel(*secFlag); err != nil {
		return usagef("%v", err)
	}
	if _, err := auth.ParseLevel(*dataSecFlag); err != nil {
		return usagef("%v", err)
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		return err
	}
	if pids, _ := readPids(*dir); len(pids) > 0 && anyAlive(pids) {
		return fmt.Errorf("a cluster is already running in %s (stop it with 'plasma cluster down -dir %s')", *dir, *dir)
	}
	self, err := os.Executable()
	if err != nil {
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
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		c, err := secrets.Issue(who, role, nil)
		if err != nil {
			return "", err
		}
		return p, os.WriteFile(p, c.PEM(), 0o600)
	}
	nnCred, err := issue("namenode.pem", "namenode", auth.RoleDaemon)
	if err != nil {
		return err
	}
	adminCred, err := issue("admin.pem", currentUser(), auth.RoleSuperuser)
	if err != nil {
		return err
	}
	ticketKey := filepath.Join(secDir, "ticket.key")
	if *nnAddr == "" {
		if *nnAddr, err = freePort(); err != nil {
			return err
		}
	}
	var procs []*exec.Cmd
	start := func(logName string, args ...string) error {
		lf, err := os.OpenFile(filepath.Join(*dir, logName), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		cmd := exec.Command(self, args...)
		cmd.Stdout, cmd.Stderr = lf, lf
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			lf.Close()
			return err
		}
		lf.Close()
		procs = append(procs, cmd)
		return nil
	}
	stopAll := func() {
		for _, p := range procs {
			p.Process.Signal(syscall.SIGTERM)
		}
		for _, p := range procs {
			p.Wait()
		}
		os.Remove(filepath.Join(*dir, "pids"))
	}
	nnArgs := []string{"namenode", "-listen", *nnAddr, "-db", filepath.Join(*dir, "namenode.db"), "-cluster", *name, "-blocksize", strconv.FormatInt(bs, 10),
		"-security", *secFlag, "-credential", nnCred, "-ticket-key", ticketKey}
	if *relaxed {
		nnArgs = append(nnArgs, "-relaxed")
	}
	if err := start("namenode.log", nnArgs...); err != nil {
		return err
	}
	if err := waitListening(ctx, *nnAddr, procs[0]); err != nil {
		stopAll()
		return fmt.Errorf("namenode did not start (see %s): %w", filepath.Join(*dir, "namenode.log"), err)
	}
	for i := 1; i <= *n; i++ {
		addr, err := freePort()
		if err != nil {
			stopAll()
			return err
		}
		dnCred, err := issue(fmt.Sprintf("dn%d.pem", i), fmt.Sprintf("datanode%d", i), auth.RoleDaemon)
		if err != nil {
			stopAll()
			return err
		}
		if err := start(fmt.Sprintf("dn%d.log", i), "datanode", "-dir", filepath.Join(*dir, fmt.Sprintf("dn%d", i)), "-listen", addr, "-namenode", *nnAddr,
			"-security", *dataSecFlag, "-namenode-security", *secFlag, "-credential", dnCred, "-ticket-key", ticketKey); err != nil {
			stopAll()
			return err
		}
	}
	cfg := client.Config{Cluster: *name, Namenodes: []string{*nnAddr}, Security: *secFlag, DataSecurity: *dataSecFlag, CredentialFile: adminCred}
	if err := waitDatanodes(ctx, cfg, *n, procs); err != nil {
		stopAll()
		return fmt.Errorf("%w (see the logs in %s)", err, *dir)
	}
	var pidLines []string
	for _, p := range procs {
		pidLines = append(pidLines, strconv.Itoa(p.Process.Pid))
	}
	if err := os.WriteFile(filepath.Join(*dir, "pids"), []byte(strings.Join(pidLines, "\n")+"\n"), 0o644); err != nil {
		stopAll()
		return err
	}
	conf := client.FormatConfigFile([]client.ClusterEntry{{Name: *name, Namenodes: []string{*nnAddr}, Security: *secFlag, DataSecurity: *dataSecFlag, Credential: adminCred}})
	os.WriteFile(filepath.Join(*dir, "client.conf"), []byte(conf), 0o644)
	cfgPath := client.ConfigFile()
	if *writeCfg {
		if err := os.WriteFile(cfgPath, []byte(conf), 0o644); err != nil {
			stopAll()
			return err
		}
	}
	fmt.Fprintf(stdout, "PlasmaFS cluster %q is up: namenode %s, %d datanodes, blocksize %d, data in %s\n", *name, *nnAddr, *n, bs, *dir)
	fmt.Fprintf(stdout, "security: namenode %s, datanodes %s; your superuser credential is %s\n", *secFlag, *dataSecFlag, adminCred)
	if *writeCfg {
		fmt.Fprintf(stdout, "client configuration written to %s; try:\n", cfgPath)
	} else {
		fmt.Fprintf(stdout, "use it with: export PLASMAFS_CONFIG=%s\n", filepath.Join(*dir, "client.conf"))
	}
	fmt.Fprintf(stdout, "  plasma put -rep 2 somefile /somefile\n  plasma ls -l /\n  plasma blocks /somefile\n")
	if *detach {
		fmt.Fprintf(stdout, "stop it with: plasma cluster down -dir %s\n", *dir)
		for _, p := range procs {
			p.Process.Release()
		}
		return nil
	}
	fmt.Fprintln(stdout, "press Ctrl-C to stop")
	exited := make(chan *exec.Cmd, len(procs))
	for _, p := range procs {
		go func() { p.Wait(); exited <- p }()
	}
	select {
	case <-ctx.Done():
		fmt.Fprintln(stdout, "stopping cluster")
		for _, p := range procs {
			p.Process.Signal(syscall.SIGTERM)
		}
		for range procs {
			<-exited
		}
		os.Remove(filepath.Join(*dir, "pids"))
		return nil
	case p := <-exited:
		for _, q := range procs {
			q.Process.Signal(syscall.SIGTERM)
		}
		os.Remove(filepath.Join(*dir, "pids"))
		return fmt.Errorf("%s exited unexpectedly (%v); cluster stopped, see logs in %s", p.Args[1], p.ProcessState, *dir)
	}
}

func waitListening(ctx context.Context, addr string, p *exec.Cmd) error {
	exited := make(chan error, 1)
	go func() {
		// Only to notice an early exit; the caller reaps it later.
		for {
			if err := p.Process.Signal(syscall.Signal(0)); err != nil {
				exited <- err
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
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
		case err := <-exited:
			return fmt.Errorf("process exited: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	return errors.New("timed out")
}

func waitDatanodes(ctx context.Context, cfg client.Config, n int, procs []*exec.Cmd) error {
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
		for _, p := range procs {
			if p.Process.Signal(syscall.Signal(0)) != nil {
				return fmt.Errorf("%s exited during start-up", strings.Join(p.Args[1:3], " "))
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("only some of %d datanodes registered in time", n)
}

func readPids(dir string) ([]int, error) {
	b, err := os.ReadFile(filepath.Join(dir, "pids"))
	if err != nil {
		return nil, err
	}
	var out []int
	for _, l := range strings.Fields(string(b)) {
		if p, err := strconv.Atoi(l); err == nil {
			out = append(out, p)
		}
	}
	return out, nil
}

func anyAlive(pids []int) bool {
	for _, p := range pids {
		if syscall.Kill(p, 0) == nil {
			return true
		}
	}
	return false
}

func cmdClusterDown(ctx context.Context, args []string) error {
	f := newFlags("cluster down", "[-dir DIR]", "Stop a local cluster started with 'plasma cluster up -detach'.", false)
	dir := f.String("dir", defaultClusterDir(), "cluster directory")
	if err := f.parse(args); err != nil {
		return err
	}
	pids, err := readPids(*dir)
	if err != nil {
		return fmt.Errorf("no running cluster recorded in %s: %w", *dir, err)
	}
	// Datanodes first, then the namenode (the first pid).
	for i := len(pids) - 1; i >= 0; i-- {
		syscall.Kill(pids[i], syscall.SIGTERM)
	}
	deadline := time.Now().Add(30 * time.Second)
	for anyAlive(pids) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if anyAlive(pids) {
		return fmt.Errorf("cluster processes %v did not stop within 30s", pids)
	}
	os.Remove(filepath.Join(*dir, "pids"))
	fmt.Fprintf(stdout, "cluster in %s stopped\n", *dir)
	return nil
}
