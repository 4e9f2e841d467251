package security

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/plasmafs/plasma/internal/auth"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/internal/rpc"
	"github.com/plasmafs/plasma/internal/wire"
	"github.com/plasmafs/plasma/tests/testkit"
)

// craftCredential signs a credential with the cluster CA the way
// credentials were issued before roles were checked: any role, with
// server usage and the daemons' server name. It stands for credentials
// already handed out.
func craftCredential(t *testing.T, s *auth.Secrets, name string, role string) string {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big1(),
		Subject:      pkix.Name{CommonName: name, Organization: []string{name}, OrganizationalUnit: []string{role}, Locality: []string{s.Cluster}},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"plasma"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, s.CACert, &key.PublicKey, s.CAKey)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(key)
	var data []byte
	data = append(data, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	data = append(data, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})...)
	data = append(data, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.CACert.Raw})...)
	p := filepath.Join(t.TempDir(), name+"-"+role+".pem")
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

var serialNo atomic.Int64

func big1() *big.Int { return big.NewInt(time.Now().UnixNano() + serialNo.Add(1)) }

// fakeServer accepts connections on addr (a free one if empty) and runs
// the server handshake at level with the credential in credFile. It
// counts the handshakes that completed: each is a client that took the
// fake for a daemon.
func fakeServer(t *testing.T, addr string, level auth.Level, credFile string) (string, *atomic.Int32, func()) {
	t.Helper()
	cred, err := auth.LoadCredential(credFile)
	if err != nil {
		t.Fatal(err)
	}
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	var ln net.Listener
	for i := 0; ; i++ { // the address may have just been freed
		if ln, err = net.Listen("tcp", addr); err == nil {
			break
		}
		if i == 100 {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Cleanup(func() { ln.Close() })
	var fooled atomic.Int32
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer nc.Close()
				if _, _, err := auth.Server(nc, level, cred); err == nil {
					fooled.Add(1)
				}
			}()
		}
	}()
	return ln.Addr().String(), &fooled, func() { ln.Close() }
}

// TestOnlyDaemonsActAsServers: a user's credential (as issued now, or as
// issued before roles were checked, with server usage), a superuser's, or
// another daemon's cannot stand in for the namenode or a datanode: the
// client refuses the server during the handshake, naming what it is.
func TestOnlyDaemonsActAsServers(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Datanodes: 1})
	if out, code := c.Run([]byte("the real data"), "put", "-stdin", "/f"); code != 0 {
		t.Fatal(out)
	}
	impostors := map[string]string{
		"user":                         c.IssueCredential("mallory", auth.RoleUser),
		"user with old server usage":   craftCredential(t, c.Secrets, "mallory", "user"),
		"superuser":                    c.AdminCred,
		"root named user (old usage)":  craftCredential(t, c.Secrets, "root", "user"),
		"old superuser (server usage)": craftCredential(t, c.Secrets, "admin", "superuser"),
	}
	impostors["datanode"] = c.IssueCredential("datanode", auth.RoleDatanode)
	for what, cred := range impostors {
		// The namenode: the client is sent to the impostor.
		addr, fooled, stop := fakeServer(t, "", auth.Privacy, cred)
		out, code := c.RunEnv([]string{"PLASMAFS_NAMENODES=" + addr}, nil, "ls", "/")
		if fooled.Load() != 0 {
			t.Errorf("%s credential as namenode: the client completed the handshake", what)
		}
		if code == 0 || !strings.Contains(out, "not of a namenode") {
			t.Errorf("%s credential as namenode: exit %d, output %q, want a refusal naming the role", what, code, out)
		}
		stop()
	}
	// A datanode: the impostor takes over the datanode's address.
	c.Kill(c.DNs[0])
	nnCred := c.IssueCredential("namenode", auth.RoleNamenode)
	for _, what := range []string{"user", "user with old server usage", "superuser", "namenode"} {
		cred := impostors[what]
		if what == "namenode" {
			cred = nnCred
		}
		_, fooled, stop := fakeServer(t, c.DNs[0].Addr, auth.Auth, cred)
		out, code := c.RunEnv([]string{"PLASMAFS_NO_SHORTCIRCUIT=1"}, nil, "cat", "/f")
		if fooled.Load() != 0 {
			t.Errorf("%s credential as datanode: the client completed the handshake", what)
		}
		if code == 0 || !strings.Contains(out, "not of a datanode") || strings.Contains(out, "the real data") {
			t.Errorf("%s credential as datanode: exit %d, output %q, want a refusal naming the role", what, code, out)
		}
		stop()
	}
}

// TestSuperuserIsExplicit: only a credential issued with the superuser
// role bypasses permissions; a user named root and a datanode are ordinary
// principals. 'plasma admin user add -superuser' issues a superuser, and
// the credential 'cluster up' gives its administrator is one.
func TestSuperuserIsExplicit(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Datanodes: 1})
	if out, code := c.Run([]byte("top secret"), "put", "-stdin", "/secret"); code != 0 {
		t.Fatal(out)
	}
	c.MustRun("chmod", "600", "/secret")
	dir := t.TempDir()
	issued := func(args ...string) string {
		out, code := c.Run(nil, append([]string{"admin", "user", "add", "-dir", c.Dir}, args...)...)
		if code != 0 {
			t.Fatalf("admin user add %v: %s", args, out)
		}
		return out
	}
	boss := filepath.Join(dir, "boss.pem")
	issued("-superuser", "-o", boss, "boss")
	rootIssued := filepath.Join(dir, "root.pem")
	if out := issued("-o", rootIssued, "root"); !strings.Contains(out, "user") || strings.Contains(out, "superuser") {
		t.Errorf("admin user add root says: %s", out)
	}
	for _, tc := range []struct {
		what  string
		cred  string
		super bool
	}{
		{"root (user role)", c.IssueCredential("root", auth.RoleUser), false},
		{"root from 'admin user add'", rootIssued, false},
		{"datanode", c.IssueCredential("datanode", auth.RoleDatanode), false},
		{"namenode", c.IssueCredential("namenode", auth.RoleNamenode), false},
		{"'admin user add -superuser'", boss, true},
		{"test superuser", c.AdminCred, true},
	} {
		env := []string{"PLASMAFS_CREDENTIAL=" + tc.cred}
		fsck, fcode := c.RunEnv(env, nil, "fsck")
		cat, ccode := c.RunEnv(env, nil, "cat", "/secret")
		chown, ocode := c.RunEnv(env, nil, "chown", "nobody", "/secret")
		if tc.super {
			if fcode != 0 || ccode != 0 || cat != "top secret" || ocode != 0 {
				t.Errorf("%s: fsck %d %q, cat %d %q, chown %d %q: want a superuser", tc.what, fcode, fsck, ccode, cat, ocode, chown)
			}
			c.MustRun("chown", "admin", "/secret")
			continue
		}
		for op, r := range map[string]struct {
			code int
			out  string
		}{"fsck": {fcode, fsck}, "cat": {ccode, cat}, "chown": {ocode, chown}} {
			if r.code == 0 || !strings.Contains(r.out, "permission denied") && !strings.Contains(r.out, "only the superuser") {
				t.Errorf("%s: %s: exit %d %q, want refused", tc.what, op, r.code, r.out)
			}
		}
	}

	// cluster up: the administrator's credential is a superuser; a cluster
	// directory whose daemon credentials have the former single role gets
	// new ones.
	cdir := filepath.Join(t.TempDir(), "cluster")
	run := func(args ...string) (string, error) {
		cmd := exec.Command(c.Bin, args...)
		cmd.Env = append(os.Environ(), "PLASMAFS_CONFIG="+filepath.Join(cdir, "client.conf"), "PLASMAFS_NAMENODES=", "PLASMAFS_CLUSTER=",
			"PLASMAFS_CREDENTIAL=", "PLASMAFS_SECURITY=", "PLASMAFS_DATA_SECURITY=")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	up := func() {
		t.Helper()
		if out, err := run("cluster", "up", "-dir", cdir, "-datanodes", "1", "-blocksize", "64K", "-size", "4M", "-detach", "-write-config=false"); err != nil {
			t.Fatalf("cluster up: %v\n%s", err, out)
		}
	}
	up()
	t.Cleanup(func() { run("cluster", "down", "-dir", cdir) })
	if out, err := run("fsck"); err != nil {
		t.Fatalf("fsck with cluster up's credential: %v\n%s", err, out)
	}
	if out, err := run("cluster", "down", "-dir", cdir); err != nil {
		t.Fatalf("cluster down: %v\n%s", err, out)
	}
	secrets, err := auth.LoadSecrets(filepath.Join(cdir, "secrets"))
	if err != nil {
		t.Fatal(err)
	}
	for file, name := range map[string]string{"namenode.pem": "namenode", "dn1.pem": "datanode1"} {
		b, _ := os.ReadFile(craftCredential(t, secrets, name, "daemon"))
		os.WriteFile(filepath.Join(cdir, "secrets", file), b, 0o600)
	}
	up()
	if out, err := run("fsck"); err != nil {
		t.Fatalf("fsck after restarting with old daemon credentials: %v\n%s", err, out)
	}
}

// TestIntegrityLevel: a cluster at level integrity works end to end
// (short-circuit and TCP, reads and writes); a datanode's level is the
// least it accepts.
func TestIntegrityLevel(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Security: "integrity", DataSecurity: "integrity", Datanodes: 2})
	data := testkit.RandomBytes(t, 5*int(c.Opts.Blocksize)+3)
	for _, sc := range []string{"", "1"} {
		env := []string{"PLASMAFS_NO_SHORTCIRCUIT=" + sc}
		if out, code := c.RunEnv(env, data, "put", "-rep", "2", "-stdin", "/f"+sc); code != 0 {
			t.Fatal(out)
		}
		for _, rc := range []string{"", "1"} {
			out, code := c.RunEnv([]string{"PLASMAFS_NO_SHORTCIRCUIT=" + rc}, nil, "cat", "/f"+sc)
			if code != 0 || out != string(data) {
				t.Fatalf("cat /f%s (no short-circuit=%q): exit %d, %d bytes", sc, rc, code, len(out))
			}
		}
	}
	if out := c.MustRun("fsck"); !strings.Contains(out, " 0 problems") {
		t.Fatal(out)
	}
	// Stronger than the datanodes' level: accepted. Weaker: refused.
	if out, code := c.RunEnv([]string{"PLASMAFS_NO_SHORTCIRCUIT=1", "PLASMAFS_SECURITY=privacy", "PLASMAFS_DATA_SECURITY=privacy"}, nil, "cat", "/f"); code != 0 || out != string(data) {
		t.Fatalf("privacy client: exit %d %.200q", code, out)
	}
	out, code := c.RunEnv([]string{"PLASMAFS_NO_SHORTCIRCUIT=1", "PLASMAFS_DATA_SECURITY=auth"}, nil, "cat", "/f")
	if code == 0 || !strings.Contains(out, "requires security level integrity") {
		t.Fatalf("auth client at an integrity datanode: exit %d %.300q", code, out)
	}
}

// tamperProxy forwards TCP connections to target; in the server→client
// direction it rewrites every occurrence of pattern with mutate. It holds
// back the last len(pattern)-1 bytes until more arrive (or 20 ms pass), so
// a pattern split between two reads is found too. hits counts rewrites.
func tamperProxy(t *testing.T, target string, pattern []byte, mutate func([]byte)) (string, *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var hits atomic.Int32
	go func() {
		for {
			a, err := ln.Accept()
			if err != nil {
				return
			}
			b, err := net.Dial("tcp", target)
			if err != nil {
				a.Close()
				continue
			}
			go func() { io.Copy(b, a); b.Close() }()
			go func() {
				defer a.Close()
				buf := make([]byte, 64<<10)
				var pending []byte
				for {
					b.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
					n, err := b.Read(buf)
					pending = append(pending, buf[:n]...)
					for off := 0; ; {
						i := bytes.Index(pending[off:], pattern)
						if i < 0 {
							break
						}
						mutate(pending[off+i : off+i+len(pattern)])
						hits.Add(1)
						off += i + len(pattern)
					}
					var ne net.Error
					idle := errors.As(err, &ne) && ne.Timeout()
					keep := 0
					if !idle && err == nil {
						keep = min(len(pending), len(pattern)-1)
					}
					if _, werr := a.Write(pending[:len(pending)-keep]); werr != nil {
						return
					}
					pending = append(pending[:0], pending[len(pending)-keep:]...)
					if err != nil && !idle {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String(), &hits
}

// crcKeeper returns the 4 bytes to XOR at compAt so that flipping bit 0 of
// the byte at flipAt leaves the CRC32C of an n-byte message unchanged. A
// CRC is affine over GF(2): the change of the CRC depends only on the
// change of the message, so this works for any content.
func crcKeeper(n, flipAt, compAt int) [4]byte {
	zero := make([]byte, n)
	base := testkit.CRC32C(zero)
	lin := func(d []byte) uint32 { return testkit.CRC32C(d) ^ base }
	d := make([]byte, n)
	d[flipAt] = 1
	target := lin(d)
	d[flipAt] = 0
	var vec, combo [32]uint32
	var have [32]bool
	for j := 0; j < 32; j++ {
		d[compAt+j/8] = 1 << (j % 8)
		v, m := lin(d), uint32(1)<<j
		d[compAt+j/8] = 0
		for b := 31; b >= 0; b-- {
			if v>>b&1 == 0 {
				continue
			}
			if !have[b] {
				have[b], vec[b], combo[b] = true, v, m
				break
			}
			v, m = v^vec[b], m^combo[b]
		}
	}
	v, m := target, uint32(0)
	for b := 31; b >= 0; b-- {
		if v>>b&1 == 1 {
			v, m = v^vec[b], m^combo[b]
		}
	}
	var out [4]byte
	binary.LittleEndian.PutUint32(out[:], m)
	return out
}

// TestIntegrityDetectsTampering: a proxy between client and daemons
// changes what the daemons send. At level auth the change goes through
// unnoticed (a file name in a listing; a block whose CRC the proxy keeps
// intact, so the client's checksum accepts it): auth protects nothing
// after the handshake, and a CRC is not a MAC. At level integrity the
// connection fails and nothing altered is accepted.
func TestIntegrityDetectsTampering(t *testing.T) {
	for _, lv := range []string{"auth", "integrity"} {
		t.Run(lv, func(t *testing.T) {
			c := clustertest.Start(t, clustertest.Options{Security: lv, DataSecurity: lv, Datanodes: 1})
			bs := int(c.Opts.Blocksize)

			// Namenode: a symbolic link's target in a listing.
			c.MustRun("ln", "-s", "/tamper-target-name", "/link")
			nnProxy, nnHits := tamperProxy(t, c.NN.Addr, []byte("tamper-target-name"), func(m []byte) { m[len(m)-1] ^= 0x20 })
			out, code := c.RunEnv([]string{"PLASMAFS_NAMENODES=" + nnProxy}, nil, "ls", "-l", "/")
			if nnHits.Load() == 0 {
				t.Fatalf("the proxy never saw the name (ls: %d %q)", code, out)
			}
			forged := strings.Contains(out, "tamper-target-namE")
			if lv == "auth" && (code != 0 || !forged) {
				t.Fatalf("auth: ls exit %d %q: expected the altered name to get through", code, out)
			}
			if lv == "integrity" && (code == 0 || forged || !strings.Contains(out, "integrity check failed")) {
				t.Fatalf("integrity: ls exit %d %q: want an integrity failure and no altered name", code, out)
			}

			// Datanode: one block that starts with a marker; the proxy
			// flips a bit in it and fixes the CRC up.
			marker := []byte("PLASMA-TAMPER-MARKER-0123456789abcdef")
			data := testkit.RandomBytes(t, bs)
			copy(data, marker)
			if out, code := c.Run(data, "put", "-stdin", "/block"); code != 0 {
				t.Fatal(out)
			}
			flipAt := len(marker) - 5
			keep := crcKeeper(bs, flipAt, flipAt+1)
			mutate := func(m []byte) {
				m[flipAt] ^= 1
				for i := range keep {
					m[flipAt+1+i] ^= keep[i]
				}
			}
			want := append([]byte(nil), data...)
			mutate(want[:len(marker)])
			if testkit.CRC32C(want) != testkit.CRC32C(data) || bytes.Equal(want, data) {
				t.Fatal("crcKeeper does not keep the CRC")
			}
			cred, _ := auth.LoadCredential(c.AdminCred)
			level, _ := auth.ParseLevel(lv)
			conn, err := rpc.Dial(context.Background(), c.NN.Addr, level, cred)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			ctx := context.Background()
			lr, err := conn.Call(ctx, &wire.Request{Op: wire.OpLookup, Txn: 5, Path: "/block", Flags: wire.FlagBegin})
			if err != nil || lr.Code != wire.OK {
				t.Fatalf("lookup: %v %+v", err, lr)
			}
			br, err := conn.Call(ctx, &wire.Request{Op: wire.OpBlocks, Txn: 5, Ino: lr.Attr.Ino})
			if err != nil || br.Code != wire.OK || len(br.Extents) != 1 {
				t.Fatalf("blocks: %v %+v", err, br)
			}
			x := br.Extents[0]
			dnProxy, dnHits := tamperProxy(t, c.DNs[0].Addr, marker, mutate)
			raw, err := net.Dial("tcp", dnProxy)
			if err != nil {
				t.Fatal(err)
			}
			defer raw.Close()
			nc, err := auth.Client(raw, level, cred, auth.RoleDatanode)
			if err != nil {
				t.Fatal(err)
			}
			nc.SetDeadline(time.Now().Add(30 * time.Second))
			if _, err := nc.Write(wire.FrameDataHeader(&wire.DataReq{Op: wire.DataRead, Block: x.Replicas[0].Start, Ticket: x.Tickets[0]})); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, bs)
			r := bufio.NewReader(nc)
			resp, err := wire.ReadDataResp(r)
			if err == nil && resp.Status != wire.OK {
				t.Fatalf("read: %s", resp.Msg)
			}
			if err == nil {
				_, err = io.ReadFull(r, buf[:resp.Length])
			}
			// What the client library does: accept the block if its CRC
			// matches the committed one.
			accepted := err == nil && testkit.CRC32C(buf) == x.CRC[0]
			if dnHits.Load() == 0 {
				t.Fatalf("the proxy never saw the block (err %v)", err)
			}
			switch lv {
			case "auth":
				if !accepted || !bytes.Equal(buf, want) {
					t.Fatalf("auth: err %v, accepted %v: expected the forged block to pass the CRC check", err, accepted)
				}
			case "integrity":
				if !errors.Is(err, auth.ErrIntegrity) || accepted {
					t.Fatalf("integrity: err %v, accepted %v: want ErrIntegrity", err, accepted)
				}
			}
		})
	}
}

// daemonPid finds the process id of a datanode by its volume directory.
func daemonPid(t *testing.T, p *clustertest.Proc) int {
	t.Helper()
	cmdlines, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, f := range cmdlines {
		b, err := os.ReadFile(f)
		if err != nil || !bytes.Contains(b, []byte("\x00-dir\x00"+p.Dir+"\x00")) || !bytes.Contains(b, []byte("datanode\x00")) {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(f)))
		return pid
	}
	t.Fatalf("no datanode process for %s", p.Dir)
	return 0
}

// localFD asks the datanode's socket for a descriptor with req and
// returns it, or the refusal.
func localFD(t *testing.T, sock string, req []byte) (int, string) {
	t.Helper()
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	c.Write(req)
	buf := make([]byte, 512)
	oob := make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := c.ReadMsgUnix(buf, oob)
	if err != nil {
		return -1, err.Error()
	}
	msgs, _ := unix.ParseSocketControlMessage(oob[:oobn])
	if len(msgs) != 1 {
		return -1, string(buf[:n])
	}
	fds, _ := unix.ParseUnixRights(&msgs[0])
	if len(fds) != 1 {
		return -1, string(buf[:n])
	}
	t.Cleanup(func() { unix.Close(fds[0]) })
	return fds[0], ""
}

func accessMode(t *testing.T, fd int) int {
	t.Helper()
	fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	if err != nil {
		t.Fatal(err)
	}
	return fl & unix.O_ACCMODE
}

// TestShortCircuitDescriptors: readers on the datanode's machine get a
// read-only descriptor of the block file; a writable one only with a write
// ticket for that datanode, and local writes still go through it (the
// datanode writes none of their data itself).
func TestShortCircuitDescriptors(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Datanodes: 1})
	dn := c.DNs[0]
	sock := filepath.Join(dn.Dir, "dn.sock")
	fd, refused := localFD(t, sock, []byte{'R'})
	if fd < 0 {
		t.Fatalf("read descriptor refused: %s", refused)
	}
	if m := accessMode(t, fd); m != unix.O_RDONLY {
		t.Fatalf("a reader got a descriptor with access mode %#o, want read-only", m)
	}
	if _, err := unix.Pwrite(fd, []byte("x"), 0); err == nil {
		t.Fatal("write through a reader's descriptor succeeded")
	}

	// Write tickets: from an allocation in an open transaction.
	cred, _ := auth.LoadCredential(c.AdminCred)
	conn, err := rpc.Dial(context.Background(), c.NN.Addr, auth.Privacy, cred)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx := context.Background()
	call := func(q *wire.Request) *wire.Response {
		r, err := conn.Call(ctx, q)
		if err != nil || r.Code != wire.OK {
			t.Fatalf("%s: %v %+v", q.Op, err, r)
		}
		return r
	}
	ino := call(&wire.Request{Op: wire.OpCreate, Txn: 7, Flags: wire.FlagBegin, Path: "/w", Type: wire.TypeFile}).Attr.Ino
	al := call(&wire.Request{Op: wire.OpAllocate, Txn: 7, Ino: ino, Index: 0, Count: 1})
	if len(al.Extents) == 0 || len(al.Extents[0].Tickets) == 0 {
		t.Fatalf("allocation without tickets: %+v", al)
	}
	block, writeTicket := al.Extents[0].Replicas[0].Start, al.Extents[0].Tickets[0]
	if out, code := c.Run(testkit.RandomBytes(t, 100), "put", "-stdin", "/r"); code != 0 {
		t.Fatal(out)
	}
	ri := call(&wire.Request{Op: wire.OpLookup, Txn: 7, Path: "/r"})
	rb := call(&wire.Request{Op: wire.OpBlocks, Txn: 7, Ino: ri.Attr.Ino})
	readTicket := rb.Extents[0].Tickets[0]
	writeReq := func(block uint64, ticket []byte) []byte {
		q := []byte{'W'}
		q = binary.LittleEndian.AppendUint64(q, block)
		q = binary.LittleEndian.AppendUint16(q, uint16(len(ticket)))
		return append(q, ticket...)
	}
	for name, req := range map[string][]byte{
		"no ticket":                 writeReq(block, nil),
		"read ticket":               writeReq(rb.Extents[0].Replicas[0].Start, readTicket),
		"write ticket, other block": writeReq(block+1000, writeTicket),
	} {
		if fd, _ := localFD(t, sock, req); fd >= 0 {
			t.Errorf("%s: got a descriptor (access mode %#o)", name, accessMode(t, fd))
		}
	}
	fd, refused = localFD(t, sock, writeReq(block, writeTicket))
	if fd < 0 || accessMode(t, fd) != unix.O_RDWR {
		t.Fatalf("write ticket: descriptor %d, refusal %q", fd, refused)
	}
	call(&wire.Request{Op: wire.OpAbort, Txn: 7})

	// Local writes: the client writes the blocks, the datanode's own
	// writes stay far below the data's size; over TCP they do not (which
	// shows the measure works).
	pid := daemonPid(t, dn)
	size := 32 * int(c.Opts.Blocksize)
	for _, sc := range []string{"", "1"} {
		data := testkit.RandomBytes(t, size)
		before := testkit.ProcWriteChars(t, pid)
		if out, code := c.RunEnv([]string{"PLASMAFS_NO_SHORTCIRCUIT=" + sc}, data, "put", "-stdin", "/local"+sc); code != 0 {
			t.Fatal(out)
		}
		wrote := testkit.ProcWriteChars(t, pid) - before
		if sc == "" && wrote >= int64(size)/2 {
			t.Errorf("short-circuit put: the datanode wrote %d bytes itself for %d bytes of data", wrote, size)
		}
		if sc == "1" && wrote < int64(size) {
			t.Errorf("TCP put: the datanode wrote only %d bytes for %d bytes of data", wrote, size)
		}
		out, code := c.RunEnv([]string{"PLASMAFS_NO_SHORTCIRCUIT=1"}, nil, "cat", "/local"+sc)
		if code != 0 || out != string(data) {
			t.Fatalf("cat /local%s over TCP: exit %d, %d bytes", sc, code, len(out))
		}
	}
}
