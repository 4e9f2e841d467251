package posix

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	nfsc "github.com/willscott/go-nfs-client/nfs"
	"github.com/willscott/go-nfs-client/nfs/rpc"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clientx"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// The bridge's answer to AUTH_UNIX authenticating nobody: root squashed
// by default, -all-squash, -anonuid/-anongid, -clients (loopback by
// default, required with a -listen address other machines can reach) and
// -secure. Root here is the cluster's superuser, whose files the bridge
// shows as uid 0 (the bridge runs as root with the superuser's
// credential).

// TestNFSRootSquash: a real NFS client (libnfs) claiming uid 0 may not
// read root's 0600 file through a bridge started with the defaults, what
// it creates belongs to the anonymous identity (nobody:nogroup), and it
// does not own what belongs to a user without a local id (whose uid shows
// as 65534 too); a call without a credential is anonymous as well. With
// -no-root-squash uid 0 reads the file.
func TestNFSRootSquash(t *testing.T) {
	needLibnfs(t)
	c := clustertest.Start(t, clustertest.Options{})
	const secret = "root's secret\n"
	testkit.PutOwned(t, c, "/secret", secret, "", "600")
	testkit.PutOwned(t, c, "/pub", "public\n", "", "644")
	testkit.PutOwned(t, c, "/ghosts", "a user without a local id\n", "ghost:ghost", "600")
	c.MustRun("chmod", "777", "/") // libnfs's URLs reach files at the root of the export only

	b := testkit.StartNFSArgs(t, c, "-listen", "127.0.0.1:0")
	if out, err := nfsCat(b, "/secret", 0, 0); err == nil || strings.Contains(out, secret) {
		t.Fatalf("libnfs as uid 0 read root's 0600 file through a bridge with the default options (exit %v):\n%s", err, out)
	}
	if out, err := nfsCat(b, "/pub", 0, 0); err != nil || out != "public\n" {
		t.Fatalf("libnfs as uid 0 could not read a 0644 file (%v):\n%s", err, out)
	}
	if out, err := nfsCat(b, "/ghosts", 0, 0); err == nil {
		t.Fatalf("squashed root read the 0600 file of a user without a local id:\n%s", out)
	}
	local := filepath.Join(t.TempDir(), "f")
	testkit.MustOK(t, "write", os.WriteFile(local, []byte("made by squashed root\n"), 0o644))
	if out, err := nfsCp(local, nfsURL(b, "/by-root", 0, 0)); err != nil {
		t.Fatalf("nfs-cp into the 0777 root directory as squashed root: %v\n%s", err, out)
	}
	if got := testkit.PlasmaOwner(t, c, "/by-root"); got != "nobody:nogroup" {
		t.Errorf("a file made by uid 0 through a root-squashing bridge belongs to %s, want nobody:nogroup", got)
	}

	// No credential at all (AUTH_NULL) is the anonymous identity too.
	anon := testkit.DialNFSAs(t, b.Addr, rpc.AuthNull)
	if f, err := anon.Open("/secret"); err == nil {
		if _, err := f.Read(make([]byte, 64)); !isNFSPermission(err) {
			t.Errorf("a read of root's 0600 file without a credential: %v, want a permission error", err)
		}
	} else if !isNFSPermission(err) {
		t.Errorf("open of root's 0600 file without a credential: %v", err)
	}

	open := testkit.StartNFSArgs(t, c, "-listen", "127.0.0.1:0", "-no-root-squash")
	if out, err := nfsCat(open, "/secret", 0, 0); err != nil || out != secret {
		t.Fatalf("libnfs as uid 0 with -no-root-squash: %v\n%s", err, out)
	}
}

// TestNFSAllSquash: with -all-squash an ordinary uid is the anonymous
// identity: it may not read its own 0600 file (which it reads through a
// bridge without the option), what it creates belongs to nobody:nogroup;
// -anonuid/-anongid choose the anonymous identity.
func TestNFSAllSquash(t *testing.T) {
	needLibnfs(t)
	c := clustertest.Start(t, clustertest.Options{})
	const mine = "uid 4242's own\n"
	testkit.PutOwned(t, c, "/mine", mine, "4242:4242", "600")
	testkit.PutOwned(t, c, "/ghosts", "a user without a local id\n", "ghost:ghost", "600")
	c.MustRun("chmod", "777", "/") // libnfs's URLs reach files at the root of the export only

	plain := testkit.StartNFSArgs(t, c, "-listen", "127.0.0.1:0")
	if out, err := nfsCat(plain, "/mine", 4242, 4242); err != nil || out != mine {
		t.Fatalf("uid 4242 reading its own file without -all-squash: %v\n%s", err, out)
	}

	b := testkit.StartNFSArgs(t, c, "-listen", "127.0.0.1:0", "-all-squash")
	if out, err := nfsCat(b, "/mine", 4242, 4242); err == nil {
		t.Fatalf("uid 4242 read its 0600 file through an -all-squash bridge:\n%s", out)
	}
	if out, err := nfsCat(b, "/ghosts", 4242, 4242); err == nil {
		t.Fatalf("the anonymous identity read the 0600 file of a user without a local id:\n%s", out)
	}
	local := filepath.Join(t.TempDir(), "f")
	testkit.MustOK(t, "write", os.WriteFile(local, []byte("made by a squashed user\n"), 0o644))
	if out, err := nfsCp(local, nfsURL(b, "/by-4242", 4242, 4242)); err != nil {
		t.Fatalf("nfs-cp into the 0777 root directory through an -all-squash bridge: %v\n%s", err, out)
	}
	if got := testkit.PlasmaOwner(t, c, "/by-4242"); got != "nobody:nogroup" {
		t.Errorf("a file made by uid 4242 through an -all-squash bridge belongs to %s, want nobody:nogroup", got)
	}

	as4242 := testkit.StartNFSArgs(t, c, "-listen", "127.0.0.1:0", "-all-squash", "-anonuid", "4242", "-anongid", "4242")
	if out, err := nfsCat(as4242, "/mine", 1000, 1000); err != nil || out != mine {
		t.Fatalf("uid 1000 squashed to -anonuid 4242 reading 4242's file: %v\n%s", err, out)
	}
}

// TestNFSClientAllowList: a bridge serves only the addresses in -clients
// (loopback by default): a connection from elsewhere is closed unanswered,
// also for a real client (libnfs from 127.0.0.1 when only 127.0.0.2 may
// connect), while the allowed address is served before and after. A
// -listen address other machines can reach is refused without -clients
// (exit 2) and accepted with it.
func TestNFSClientAllowList(t *testing.T) {
	needLibnfs(t)
	c := clustertest.Start(t, clustertest.Options{})
	c.MustRun("mkdir", "/visible")

	b := testkit.StartNFSArgs(t, c, "-listen", "127.0.0.1:0", "-clients", "127.0.0.2")
	allowed := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}
	if !nfsNullAnswered(t, dialFrom(t, b.Addr, allowed)) {
		t.Fatal("a NULL call from 127.0.0.2, which -clients allows, was not answered")
	}
	if nfsNullAnswered(t, dialFrom(t, b.Addr, &net.TCPAddr{IP: net.IPv4(127, 0, 1, 7)})) {
		t.Error("a NULL call from 127.0.1.7 was answered by a bridge with -clients 127.0.0.2")
	}
	if out, err := nfsLs(b, "/"); err == nil || strings.Contains(out, "visible") {
		t.Errorf("libnfs from 127.0.0.1 listed the export of a bridge with -clients 127.0.0.2 (%v):\n%s", err, out)
	}
	if !nfsNullAnswered(t, dialFrom(t, b.Addr, allowed)) {
		t.Fatal("127.0.0.2 was not served after the refusals")
	}

	// The default is loopback only; it does not extend to other machines.
	code, stderr := nfsRefusesToStart(t, c, "-listen", "0.0.0.0:0")
	if code != 2 || !strings.Contains(stderr, "-clients") {
		t.Fatalf("plasma nfs -listen 0.0.0.0:0 without -clients: exit %d, want 2 and a message naming -clients:\n%s", code, stderr)
	}
	anywhere := testkit.StartNFSArgs(t, c, "-listen", "0.0.0.0:0", "-clients", "127.0.0.1")
	if out, err := nfsLs(anywhere, "/"); err != nil || !strings.Contains(out, "visible") {
		t.Fatalf("libnfs from 127.0.0.1 through -listen 0.0.0.0 -clients 127.0.0.1: %v\n%s", err, out)
	}
}

// TestNFSSecurePorts: with -secure a connection from an unprivileged
// source port is closed unanswered, one from a port below 1024 served.
func TestNFSSecurePorts(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	b := testkit.StartNFSArgs(t, c, "-listen", "127.0.0.1:0", "-secure")
	if nfsNullAnswered(t, dialFrom(t, b.Addr, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})) {
		t.Error("a NULL call from an unprivileged source port was answered by a -secure bridge")
	}
	if !nfsNullAnswered(t, dialPrivileged(t, b.Addr)) {
		t.Error("a NULL call from a privileged source port was not answered by a -secure bridge")
	}
}

func needLibnfs(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("nfs-cat"); err != nil {
		t.Fatal("libnfs-utils not installed: make test installs it (apt-get install -y libnfs-utils)")
	}
}

// nfsURL is a libnfs URL of path (absolute in the export) on bridge b,
// for AUTH_UNIX uid and gid. Exports are not listed first
// (auto-traverse-mounts=0): one round trip less, nothing else.
func nfsURL(b *testkit.NFSBridge, path string, uid, gid int) string {
	return fmt.Sprintf("nfs://127.0.0.1/%s?nfsport=%s&mountport=%s&auto-traverse-mounts=0&uid=%d&gid=%d",
		path, b.Port, b.Port, uid, gid)
}

// libnfsTool runs a libnfs-utils command and returns its output.
func libnfsTool(name string, args ...string) (string, error) {
	var out, errs bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = &out, &errs
	err := cmd.Run()
	if err != nil {
		err = fmt.Errorf("%s: %w: %s", name, err, strings.TrimSpace(errs.String()))
	}
	return out.String(), err
}

func nfsCat(b *testkit.NFSBridge, path string, uid, gid int) (string, error) {
	return libnfsTool("nfs-cat", nfsURL(b, path, uid, gid))
}

func nfsLs(b *testkit.NFSBridge, path string) (string, error) {
	return libnfsTool("nfs-ls", nfsURL(b, path, 0, 0))
}

func nfsCp(from, to string) (string, error) { return libnfsTool("nfs-cp", from, to) }

func isNFSPermission(err error) bool {
	return errors.Is(err, os.ErrPermission) || errors.Is(nfsErrno(err), syscall.EACCES)
}

// dialFrom connects to addr from local.
func dialFrom(t *testing.T, addr string, local *net.TCPAddr) net.Conn {
	t.Helper()
	conn, err := (&net.Dialer{LocalAddr: local}).Dial("tcp", addr)
	if err != nil {
		t.Fatalf("connect to %s from %s: %v", addr, local, err)
	}
	return conn
}

// dialPrivileged connects to addr from a free loopback source port below
// 1024 (binding one takes root, which the suite runs as).
func dialPrivileged(t *testing.T, addr string) net.Conn {
	t.Helper()
	for port := 1023; port >= 600; port-- {
		local := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port}
		conn, err := (&net.Dialer{LocalAddr: local}).Dial("tcp", addr)
		switch {
		case err == nil:
			return conn
		case errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM):
			t.Fatalf("binding source port %d: %v (the suite runs as root)", port, err)
		}
	}
	t.Fatal("no free source port below 1024")
	return nil
}

// nfsNullAnswered sends an NFSv3 NULL call on conn (and closes it): true
// if it is answered, false if the bridge closes the connection without an
// answer.
func nfsNullAnswered(t *testing.T, conn net.Conn) bool {
	t.Helper()
	defer conn.Close()
	from := conn.LocalAddr()
	// Only a bound on a hung test: an open connection is never silent
	// this long, whether it is served or refused.
	conn.SetDeadline(time.Now().Add(2 * time.Minute))
	const xid = 0x5eed
	call := binary.BigEndian.AppendUint32(nil, 0x80000000|40)
	for _, v := range []uint32{xid, 0, 2, 100003, 3, 0, 0, 0, 0, 0} { // call, RPC 2, NFS 3 NULL, AUTH_NULL twice
		call = binary.BigEndian.AppendUint32(call, v)
	}
	if _, err := conn.Write(call); err != nil {
		if closedByPeer(err) {
			return false
		}
		t.Fatalf("send a NULL call from %s: %v", from, err)
	}
	reply := make([]byte, 8)
	if _, err := io.ReadFull(conn, reply); err != nil {
		if closedByPeer(err) {
			return false
		}
		t.Fatalf("read the answer to a NULL call from %s: %v", from, err)
	}
	if got := binary.BigEndian.Uint32(reply[4:]); got != xid {
		t.Fatalf("answer to a NULL call from %s: xid %#x, want %#x", from, got, xid)
	}
	return true
}

func closedByPeer(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// nfsRefusesToStart runs 'plasma nfs' with args, which must not start
// serving, and returns its exit status and standard error.
func nfsRefusesToStart(t *testing.T, c *clustertest.Procs, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(c.Bin, append([]string{"nfs"}, args...)...)
	cmd.Env = c.Env()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	testkit.MustOK(t, "stdout pipe", err)
	testkit.MustOK(t, "start plasma nfs", cmd.Start())
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "plasma: serving NFSv3") {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("plasma nfs %s started serving: %s", strings.Join(args, " "), sc.Text())
		}
	}
	cmd.Wait()
	return cmd.ProcessState.ExitCode(), stderr.String()
}

// TestNFSNoGiveAwayNoTakeOver: the bridge acts with a superuser's
// credential, so it must refuse what the caller may not do itself: an
// owner may not give its file to another user (to root, say: squashed
// clients would make root's files), and a CREATE of an existing name
// (UNCHECKED, which sets the attributes it carries) may not change the
// mode of another user's file.
func TestNFSNoGiveAwayNoTakeOver(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	c.MustRun("chmod", "777", "/")
	testkit.PutOwned(t, c, "/bobs", "bob's\n", "5151:5151", "600")
	b := testkit.StartNFSArgs(t, c, "-listen", "127.0.0.1:0")
	u := testkit.DialNFSAs(t, b.Addr, rpc.NewAuthUnix("client", 4242, 4242).Auth())
	_, err := u.Create("/mine", 0o644)
	testkit.MustOK(t, "create as uid 4242", err)
	for _, change := range []struct {
		what string
		sa   nfsc.Sattr3
	}{
		{"to uid 5151", nfsc.Sattr3{UID: nfsc.SetUID{SetIt: true, UID: 5151}}},
		{"to group 5151", nfsc.Sattr3{GID: nfsc.SetUID{SetIt: true, UID: 5151}}},
		{"to root", nfsc.Sattr3{UID: nfsc.SetUID{SetIt: true, UID: 0}}},
	} {
		if err := u.Setattr("/mine", change.sa); err == nil {
			t.Errorf("uid 4242 gave its file away %s", change.what)
		}
	}
	if err := u.Setattr("/mine", nfsc.Sattr3{GID: nfsc.SetUID{SetIt: true, UID: 4242}}); err != nil {
		t.Errorf("uid 4242 giving its file to its own group: %v", err)
	}
	if got := testkit.PlasmaOwner(t, c, "/mine"); got != "4242:4242" {
		t.Errorf("uid 4242's file belongs to %s after the refused changes", got)
	}
	// Answered as knfsd does (the file is there; its mode is not the
	// caller's to set), which is not what this checks.
	u.Create("/bobs", 0o666) // UNCHECKED, with a mode
	cl := c.Client(client.Config{})
	defer cl.Close()
	fi, err := clientx.Auto(cl, clientx.Durable).Lstat(context.Background(), "/bobs")
	testkit.MustOK(t, "stat /bobs", err)
	if fi.User != "5151" || fi.Mode.Perm() != 0o600 {
		t.Errorf("bob's file after uid 4242's CREATE: owner %s mode %o, want 5151 and 600", fi.User, fi.Mode.Perm())
	}
}
