package security

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/auth"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/internal/rpc"
	"github.com/plasmafs/plasma/internal/wire"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestSecurityLevels runs put/get/ls end to end at each level.
func TestSecurityLevels(t *testing.T) {
	for _, lv := range [][2]string{{"none", "none"}, {"auth", "auth"}, {"privacy", "privacy"}, {"privacy", "auth"}} {
		t.Run(lv[0]+"-"+lv[1], func(t *testing.T) {
			c := clustertest.Start(t, clustertest.Options{Security: lv[0], DataSecurity: lv[1]})
			data := testkit.RandomBytes(t, 5*int(c.Opts.Blocksize)+3)
			if out, code := c.Run(data, "put", "-rep", "2", "-stdin", "/f"); code != 0 {
				t.Fatal(out)
			}
			for _, sc := range []string{"", "1"} {
				out, code := c.RunEnv([]string{"PLASMAFS_NO_SHORTCIRCUIT=" + sc}, nil, "cat", "/f")
				if code != 0 || out != string(data) {
					t.Fatalf("cat (no short-circuit=%q): exit %d, %d bytes", sc, code, len(out))
				}
			}
			if out := c.MustRun("ls", "-l", "/"); !strings.Contains(out, " f") {
				t.Fatalf("ls: %s", out)
			}
			if out := c.MustRun("fsck"); !strings.Contains(out, " 0 problems") {
				t.Fatal(out)
			}
		})
	}
}

// TestCredentialsRefused: no credential, another cluster's credential,
// or the wrong level are refused with a clear message.
func TestCredentialsRefused(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	other, err := auth.InitSecrets(filepath.Join(t.TempDir(), "other"), "other")
	if err != nil {
		t.Fatal(err)
	}
	foreign, _ := other.Issue("mallory", auth.RoleSuperuser, nil)
	foreignFile := filepath.Join(t.TempDir(), "mallory.pem")
	os.WriteFile(foreignFile, foreign.PEM(), 0o600)
	garbage := filepath.Join(t.TempDir(), "garbage.pem")
	os.WriteFile(garbage, []byte("not a credential"), 0o600)
	for _, tc := range []struct {
		env  []string
		want string
	}{
		{[]string{"PLASMAFS_CREDENTIAL="}, "needs a credential"},
		{[]string{"PLASMAFS_CREDENTIAL=" + foreignFile}, "authentication failed"},
		{[]string{"PLASMAFS_CREDENTIAL=" + garbage}, "not a plasma credential"},
		{[]string{"PLASMAFS_SECURITY=none"}, "requires security level privacy"},
	} {
		out, code := c.RunEnv(tc.env, nil, "ls", "/")
		if code == 0 || !strings.Contains(out, tc.want) {
			t.Errorf("env %v: exit %d, output %q lacks %q", tc.env, code, out, tc.want)
		}
	}
	// A user credential cannot act as a datanode.
	user := c.IssueCredential("eve", auth.RoleUser)
	cred, _ := auth.LoadCredential(user)
	conn, err := rpc.Dial(context.Background(), c.NN.Addr, auth.Privacy, cred)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	resp, err := conn.Call(context.Background(), &wire.Request{Op: wire.OpRegister, Node: &wire.NodeInfo{Identity: "fake", Cluster: "test", Blocksize: uint32(c.Opts.Blocksize), Blocks: 10}})
	if err != nil || resp.Code != wire.ErrCodePerm {
		t.Fatalf("user registering as datanode: %v %+v", err, resp)
	}
	resp, err = conn.Call(context.Background(), &wire.Request{Op: wire.OpFsck, Txn: 1, Flags: wire.FlagBegin})
	if err != nil || resp.Code != wire.ErrCodePerm {
		t.Fatalf("user running fsck: %v %+v", err, resp)
	}
}

// TestTickets: datanodes refuse forged, expired, out-of-range and
// ended-transaction tickets for reads and writes, and accept valid ones.
func TestTickets(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Datanodes: 1})
	ctx := context.Background()
	cl := c.Client(client.Config{})
	testkit.WriteFile(t, cl, "/t", testkit.RandomBytes(t, 3*int(c.Opts.Blocksize)), 1)
	cl.Close()
	cred, _ := auth.LoadCredential(c.AdminCred)
	conn, err := rpc.Dial(ctx, c.NN.Addr, auth.Privacy, cred)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	const txn = 77
	lr, _ := conn.Call(ctx, &wire.Request{Op: wire.OpLookup, Txn: txn, Path: "/t", Flags: wire.FlagBegin})
	br, err := conn.Call(ctx, &wire.Request{Op: wire.OpBlocks, Txn: txn, Ino: lr.Attr.Ino})
	if err != nil || br.Code != wire.OK || len(br.Extents) == 0 || len(br.Extents[0].Tickets) == 0 {
		t.Fatalf("blocks: %v %+v", err, br)
	}
	x := br.Extents[0]
	node, start, good := x.Replicas[0].Node, x.Replicas[0].Start, x.Tickets[0]
	addr := c.DNs[0].Addr
	bs := int(c.Opts.Blocksize)
	key := c.Secrets.TicketKey
	read := func(ticket []byte, block uint64) *wire.DataResp {
		return testkit.DataCall(t, addr, cred, &wire.DataReq{Op: wire.DataRead, Block: block, Ticket: ticket}, nil)
	}
	write := func(ticket []byte, block uint64) *wire.DataResp {
		data := make([]byte, bs)
		return testkit.DataCall(t, addr, cred, &wire.DataReq{Op: wire.DataWrite, Block: block, Length: uint32(bs), CRC: checksum(data), Ticket: ticket}, data)
	}
	if r := read(good, start); r.Status != wire.OK {
		t.Fatalf("valid read ticket refused: %s", r.Msg)
	}
	free := start + 1000 // a block nobody uses
	validWrite := (&auth.Ticket{Tag: 5, Node: node, Start: free, Count: 1, Write: true, Expiry: time.Now().Add(time.Hour).Unix(), Seq: 1<<63 - 1}).Seal(key)
	if r := write(validWrite, free); r.Status != wire.OK {
		t.Fatalf("valid write ticket refused: %s", r.Msg)
	}
	forged := append([]byte(nil), good...)
	forged[len(forged)-1] ^= 1
	wrongKey := (&auth.Ticket{Tag: 5, Node: node, Start: free, Count: 1, Write: true, Expiry: time.Now().Add(time.Hour).Unix()}).Seal([]byte("not the cluster key at all......"))
	expired := (&auth.Ticket{Tag: 5, Node: node, Start: free, Count: 1, Write: true, Expiry: time.Now().Add(-time.Minute).Unix()}).Seal(key)
	for _, tc := range []struct {
		name string
		r    *wire.DataResp
		want string
	}{
		{"no ticket read", read(nil, start), "without a ticket"},
		{"forged read", read(forged, start), "forged"},
		{"forged write", write(wrongKey, free), "forged"},
		{"expired write", write(expired, free), "expired"},
		{"expired read", read(expired, free), "expired"},
		{"out of range read", read(good, start+uint64(x.Count)), "does not cover"},
		{"read ticket used to write", write(good, start), "read-only ticket"},
	} {
		if tc.r.Status == wire.OK || !strings.Contains(tc.r.Msg, tc.want) {
			t.Errorf("%s: status %d %q, want refusal mentioning %q", tc.name, tc.r.Status, tc.r.Msg, tc.want)
		}
	}
	// Ending the transaction revokes its tickets (the datanode learns it
	// with its next heartbeat).
	conn.Call(ctx, &wire.Request{Op: wire.OpAbort, Txn: txn})
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := read(good, start)
		if r.Status != wire.OK {
			if !strings.Contains(r.Msg, "ended") {
				t.Fatalf("revoked ticket refused for the wrong reason: %s", r.Msg)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("ticket of an ended transaction still accepted after 30s")
		}
		time.Sleep(20 * time.Millisecond) // polling for the heartbeat
	}
}

// TestPermissions: owner, group and mode are enforced for ordinary users.
func TestPermissions(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	alice := []string{"PLASMAFS_CREDENTIAL=" + c.IssueCredential("alice", auth.RoleUser)}
	bob := []string{"PLASMAFS_CREDENTIAL=" + c.IssueCredential("bob", auth.RoleUser)}
	run := func(env []string, stdin []byte, args ...string) (string, int) { return c.RunEnv(env, stdin, args...) }
	c.MustRun("mkdir", "/home")
	c.MustRun("mkdir", "/home/bob")
	c.MustRun("chown", "bob:bob", "/home/bob")
	if out, code := run(bob, []byte("bob's secret"), "put", "-stdin", "/home/bob/secret"); code != 0 {
		t.Fatal(out)
	}
	if out, code := run(bob, nil, "chmod", "600", "/home/bob/secret"); code != 0 {
		t.Fatal(out)
	}
	if out, code := run(bob, nil, "cat", "/home/bob/secret"); code != 0 || out != "bob's secret" {
		t.Fatalf("owner cannot read own file: %d %q", code, out)
	}
	for _, tc := range []struct {
		args  []string
		stdin []byte
	}{
		{[]string{"cat", "/home/bob/secret"}, nil},
		{[]string{"put", "-stdin", "/home/bob/intruder"}, []byte("x")},
		{[]string{"chown", "alice", "/home/bob/secret"}, nil},
		{[]string{"chmod", "666", "/home/bob/secret"}, nil},
		{[]string{"rm", "/home/bob/secret"}, nil},
		{[]string{"mv", "/home/bob/secret", "/stolen"}, nil},
	} {
		out, code := run(alice, tc.stdin, tc.args...)
		if code == 0 || !strings.Contains(out, "permission denied") {
			t.Errorf("alice %v: exit %d %q, want permission denied", tc.args, code, out)
		}
	}
	// Bob cannot give his file away either; the superuser can.
	if out, code := run(bob, nil, "chown", "alice", "/home/bob/secret"); code == 0 || !strings.Contains(out, "permission denied") {
		t.Errorf("bob chown: %d %q", code, out)
	}
	c.MustRun("chown", "alice", "/home/bob/secret")
	if out, code := run(alice, nil, "cat", "/home/bob/secret"); code != 0 || out != "bob's secret" {
		t.Errorf("after chown alice cannot read: %d %q", code, out)
	}
	// Files belong to the authenticated user, whatever the client claims.
	if out, code := run(alice, []byte("a"), "put", "-stdin", "/alice-file"); code == 0 {
		t.Errorf("alice wrote into root's 0755 /: %s", out)
	}
	c.MustRun("mkdir", "/tmp")
	c.MustRun("chmod", "777", "/tmp")
	if out, code := run(alice, []byte("a"), "put", "-stdin", "/tmp/a"); code != 0 {
		t.Fatal(out)
	}
	if out := c.MustRun("ls", "-l", "/tmp"); !strings.Contains(out, "alice") {
		t.Errorf("owner not alice: %s", out)
	}
}

// TestPrivacyOnTheWire: at level privacy the namenode connection carries
// no plaintext file names; at level none it does (so the check works).
func TestPrivacyOnTheWire(t *testing.T) {
	for _, lv := range []string{"privacy", "none"} {
		c := clustertest.Start(t, clustertest.Options{Security: lv, DataSecurity: "none", Datanodes: 1})
		p := testkit.NewProxy(t, c.NN.Addr)
		cfg := client.Config{Namenodes: []string{p.Addr()}, Security: lv, DataSecurity: "none", CredentialFile: c.AdminCred}
		cl, err := client.New(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		name := "/very-secret-file-name-" + lv
		if _, err := cl.CopyIn(context.Background(), strings.NewReader("data"), name, client.CopyOptions{}); err != nil {
			t.Fatal(err)
		}
		cl.Close()
		visible := p.Contains("very-secret-file-name")
		if lv == "privacy" && visible {
			t.Errorf("privacy: file name visible on the wire")
		}
		if lv == "none" && !visible {
			t.Errorf("none: file name not seen on the wire; the capture does not work")
		}
	}
}

// TestHostileClients: garbage and a 4 GiB length prefix get a client
// disconnected while other clients keep working.
func TestHostileClients(t *testing.T) {
	for _, lv := range []string{"none", "privacy"} {
		t.Run(lv, func(t *testing.T) {
			c := clustertest.Start(t, clustertest.Options{Security: lv, DataSecurity: lv, Datanodes: 1})
			good := c.Client(client.Config{})
			defer good.Close()
			ctx := context.Background()
			attacks := [][]byte{
				[]byte("GET / HTTP/1.0\r\n\r\n"),
				append([]byte{'N'}, 0xff, 0xff, 0xff, 0xff, 1, 0, 0, 0, 0, 0, 0, 0),
				bytes.Repeat([]byte{0xAB}, 100000),
			}
			for i, a := range attacks {
				for _, target := range []string{c.NN.Addr, c.DNs[0].Addr} {
					nc, err := net.Dial("tcp", target)
					if err != nil {
						t.Fatal(err)
					}
					nc.Write(a)
					if lv == "none" && i == 1 {
						// Past the handshake: read its answer byte, then the
						// oversized frame must end the connection.
						var b [1]byte
						nc.Read(b[:])
					}
					nc.SetReadDeadline(time.Now().Add(30 * time.Second))
					_, err = io.Copy(io.Discard, nc)
					var ne net.Error
					if errors.As(err, &ne) && ne.Timeout() {
						t.Errorf("attack %d on %s: connection not closed", i, target)
					}
					nc.Close()
				}
				if err := good.Ping(ctx); err != nil {
					t.Fatalf("good client broken after attack %d: %v", i, err)
				}
			}
			testkit.WriteFile(t, good, "/still-works", []byte("yes"), 1)
			if got := testkit.ReadFile(t, good, "/still-works"); string(got) != "yes" {
				t.Fatal(string(got))
			}
		})
	}
}

func checksum(b []byte) uint32 { return testkit.CRC32C(b) }
