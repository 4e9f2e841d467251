package testkit

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	nfsc "github.com/willscott/go-nfs-client/nfs"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clientx"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/willscott/go-nfs-client/nfs/rpc"
)

// PutOwned writes data to path as the cluster's superuser, then gives it
// owner (USER:GROUP, unless empty) and mode.
func PutOwned(t *testing.T, c *clustertest.Procs, path, data, owner, mode string) {
	t.Helper()
	if out, code := c.Run([]byte(data), "put", "-stdin", path); code != 0 {
		t.Fatalf("plasma put %s: exit %d\n%s", path, code, out)
	}
	if owner != "" {
		c.MustRun("chown", owner, path)
	}
	c.MustRun("chmod", mode, path)
}

// PlasmaOwner is path's USER:GROUP as PlasmaFS records it.
func PlasmaOwner(t *testing.T, c *clustertest.Procs, path string) string {
	t.Helper()
	cl := c.Client(client.Config{})
	defer cl.Close()
	fi, err := clientx.Auto(cl, clientx.Durable).Lstat(context.Background(), path)
	MustOK(t, "stat "+path, err)
	return fi.User + ":" + fi.Group
}

// NFSBridge is a 'plasma nfs' process.
type NFSBridge struct {
	Addr string
	Port string
	Cmd  *exec.Cmd
	Done chan struct{} // closed when the bridge process has exited
}

// StartNFS starts 'plasma nfs' on a free loopback port and returns once
// it listens. It serves uid 0 as root (-no-root-squash): the tests act as
// root (DialNFS, and libnfs run by root), as the owner of what the
// cluster's superuser made (nfs_identity_test.go tests squashing).
func StartNFS(t *testing.T, c *clustertest.Procs, args ...string) *NFSBridge {
	t.Helper()
	return StartNFSArgs(t, c, append([]string{"-listen", "127.0.0.1:0", "-no-root-squash"}, args...)...)
}

// StartNFSArgs starts 'plasma nfs' with exactly args and returns once it
// listens.
func StartNFSArgs(t *testing.T, c *clustertest.Procs, args ...string) *NFSBridge {
	t.Helper()
	return StartNFSWith(t, c.Bin, c.Env(), args...)
}

// StartNFSWith starts 'plasma nfs' (binary bin) with exactly args and the
// environment env (which names the namenodes) and returns once it
// listens.
func StartNFSWith(t *testing.T, bin string, env []string, args ...string) *NFSBridge {
	t.Helper()
	b := &NFSBridge{Done: make(chan struct{})}
	b.Cmd = exec.Command(bin, append([]string{"nfs"}, args...)...)
	b.Cmd.Env = append(env, os.Getenv("PLASMA_NFS_ENV"))
	b.Cmd.Stderr = os.Stderr
	out, err := b.Cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		b.Cmd.Process.Signal(syscall.SIGTERM)
		<-b.Done
	})
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if l := sc.Text(); strings.HasPrefix(l, "plasma: serving NFSv3") {
			b.Addr = l[strings.LastIndex(l, " ")+1:]
			break
		}
	}
	go func() {
		for sc.Scan() {
		}
		b.Cmd.Wait()
		close(b.Done)
	}()
	if b.Addr == "" {
		<-b.Done
		t.Fatalf("plasma nfs did not start (exit %d)", b.Cmd.ProcessState.ExitCode())
	}
	b.Port = b.Addr[strings.LastIndex(b.Addr, ":")+1:]
	return b
}

// DialNFS mounts the bridge's export with the Go NFSv3 client, as root
// (AUTH_UNIX uid 0: calls without a credential are anonymous).
func DialNFS(t *testing.T, addr string) *nfsc.Target {
	t.Helper()
	return DialNFSAs(t, addr, rpc.NewAuthUnix("client", 0, 0).Auth())
}

// DialNFSAs mounts the export with the credential auth on every call.
func DialNFSAs(t *testing.T, addr string, auth rpc.Auth) *nfsc.Target {
	t.Helper()
	// The client binds a random local port and does not retry when it is
	// taken: try a few times.
	var rc *rpc.Client
	var err error
	for i := 0; i < 20; i++ {
		if rc, err = rpc.DialTCP("tcp", addr, false); err == nil || !errors.Is(err, syscall.EADDRINUSE) {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rc.Close)
	m := &nfsc.Mount{Client: rc}
	tg, err := m.Mount("/", auth)
	if err != nil {
		t.Fatalf("NFS mount: %v", err)
	}
	return tg
}

// NFSReadFile reads the whole file p (relative to the export's root)
// through tg.
func NFSReadFile(tg *nfsc.Target, p string) ([]byte, error) {
	f, err := tg.Open("/" + p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}
