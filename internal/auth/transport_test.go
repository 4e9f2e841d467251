package auth

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func testSecrets(t testing.TB) *Secrets {
	t.Helper()
	s, err := InitSecrets(filepath.Join(t.TempDir(), "secrets"), "test")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func issue(t testing.TB, s *Secrets, name string, role Role) *Credential {
	t.Helper()
	c, err := s.Issue(name, role, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// legacyCredential is a credential as Issue made them before roles were
// checked: any role, with server usage.
func legacyCredential(t testing.TB, s *Secrets, name string, role Role) *Credential {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: name, Organization: []string{name}, OrganizationalUnit: []string{string(role)}, Locality: []string{s.Cluster}},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{serverName},
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
	c, err := ParseCredential(data)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// pair runs Server (serverLevel, scred) and Client (clientLevel, ccred,
// want) over loopback TCP and returns both ends' results.
func pair(t *testing.T, serverLevel Level, scred *Credential, clientLevel Level, ccred *Credential, want ...Role) (sc, cc net.Conn, id *Identity, serr, cerr error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		raw, err := ln.Accept()
		if err != nil {
			serr = err
			return
		}
		sc, id, serr = Server(raw, serverLevel, scred)
		if serr != nil {
			raw.Close()
		}
	}()
	raw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	cc, cerr = Client(raw, clientLevel, ccred, want...)
	if cerr != nil {
		raw.Close()
	}
	<-done
	if sc != nil {
		t.Cleanup(func() { sc.Close() })
	}
	if cc != nil {
		t.Cleanup(func() { cc.Close() })
	}
	return
}

func TestOnlyDaemonsServe(t *testing.T) {
	s := testSecrets(t)
	nn := issue(t, s, "namenode", RoleNamenode)
	dn := issue(t, s, "datanode1", RoleDatanode)
	admin := issue(t, s, "admin", RoleSuperuser)
	user := issue(t, s, "mallory", RoleUser)
	if slices.Contains(user.Cert.Leaf.ExtKeyUsage, x509.ExtKeyUsageServerAuth) || slices.Contains(admin.Cert.Leaf.ExtKeyUsage, x509.ExtKeyUsageServerAuth) {
		t.Fatal("a user credential carries server usage")
	}
	if !slices.Contains(dn.Cert.Leaf.ExtKeyUsage, x509.ExtKeyUsageServerAuth) {
		t.Fatal("a datanode credential lacks server usage")
	}
	for _, tc := range []struct {
		name   string
		server *Credential
		want   []Role
		ok     bool
	}{
		{"namenode as namenode", nn, []Role{RoleNamenode}, true},
		{"datanode as datanode", dn, []Role{RoleDatanode}, true},
		{"datanode by default", dn, nil, true},
		{"user as namenode", user, []Role{RoleNamenode}, false},
		{"superuser as namenode", admin, []Role{RoleNamenode}, false},
		{"user as datanode", user, []Role{RoleDatanode}, false},
		{"user by default", user, nil, false},
		{"datanode as namenode", dn, []Role{RoleNamenode}, false},
		{"namenode as datanode", nn, []Role{RoleDatanode}, false},
		{"legacy user cert with server usage as namenode", legacyCredential(t, s, "mallory", RoleUser), []Role{RoleNamenode}, false},
		{"legacy daemon cert as namenode", legacyCredential(t, s, "namenode", "daemon"), []Role{RoleNamenode}, false},
	} {
		for _, lv := range []Level{Auth, Integrity, Privacy} {
			_, cc, _, serr, cerr := pair(t, lv, tc.server, lv, admin, tc.want...)
			if tc.ok && (cerr != nil || serr != nil || cc == nil) {
				t.Errorf("%s at %s: refused: client %v, server %v", tc.name, lv, cerr, serr)
			}
			if !tc.ok {
				var re *RoleError
				if cerr == nil || !errors.As(cerr, &re) || !errors.Is(cerr, ErrAuth) {
					t.Errorf("%s at %s: client error %v, want a RoleError", tc.name, lv, cerr)
				} else if re.User != tc.server.Identity.User {
					t.Errorf("%s: error names %q", tc.name, re.User)
				}
				if serr == nil {
					t.Errorf("%s at %s: the server's handshake completed", tc.name, lv)
				}
			}
		}
	}
}

func TestSuperIsExplicit(t *testing.T) {
	s := testSecrets(t)
	for _, tc := range []struct {
		name  string
		role  Role
		super bool
	}{{"root", RoleUser, false}, {"alice", RoleSuperuser, true}, {"root", RoleSuperuser, true}, {"datanode1", RoleDatanode, false}, {"namenode", RoleNamenode, false}} {
		if got := issue(t, s, tc.name, tc.role).Identity.Super(); got != tc.super {
			t.Errorf("%s (%s): Super() = %v", tc.name, tc.role, got)
		}
	}
	if legacyCredential(t, s, "dn", "daemon").Identity.Super() {
		t.Error("a legacy daemon credential is a superuser")
	}
	if _, err := s.Issue("x", "daemon", nil); err == nil {
		t.Error("Issue accepted an unknown role")
	}
}

func TestLevels(t *testing.T) {
	s := testSecrets(t)
	dn := issue(t, s, "datanode1", RoleDatanode)
	user := issue(t, s, "alice", RoleUser)
	for _, sl := range []Level{None, Auth, Integrity, Privacy} {
		for _, cl := range []Level{None, Auth, Integrity, Privacy} {
			sc, cc, id, serr, cerr := pair(t, sl, dn, cl, user)
			if cl.Stronger(sl) || cl == sl {
				if serr != nil || cerr != nil {
					t.Fatalf("server %s, client %s: %v / %v", sl, cl, serr, cerr)
				}
				if cl != None && (id == nil || id.User != "alice") {
					t.Fatalf("server %s, client %s: identity %+v", sl, cl, id)
				}
				// Both directions, large and small writes.
				big := make([]byte, 3*maxRecord+17)
				rand.Read(big)
				go func() { cc.Write(big); cc.Write([]byte("x")) }()
				got := make([]byte, len(big)+1)
				if _, err := io.ReadFull(sc, got); err != nil || !bytes.Equal(got[:len(big)], big) || got[len(big)] != 'x' {
					t.Fatalf("server %s, client %s: client→server: %v", sl, cl, err)
				}
				go sc.Write([]byte("pong"))
				var b [4]byte
				if _, err := io.ReadFull(cc, b[:]); err != nil || string(b[:]) != "pong" {
					t.Fatalf("server %s, client %s: server→client: %v", sl, cl, err)
				}
				if _, ok := sc.(*macConn); ok != (cl == Integrity) {
					t.Fatalf("client %s: server connection %T", cl, sc)
				}
				continue
			}
			if cerr == nil || !strings.Contains(cerr.Error(), "requires security level "+sl.String()) {
				t.Errorf("server %s, client %s: %v", sl, cl, cerr)
			}
		}
	}
}

// tamperProxy forwards between a and b, flipping the byte at offset at of
// the server→client stream.
func tamperProxy(t *testing.T, target string, at int) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		a, err := ln.Accept()
		if err != nil {
			return
		}
		b, err := net.Dial("tcp", target)
		if err != nil {
			a.Close()
			return
		}
		go func() { io.Copy(b, a); b.Close() }()
		buf := make([]byte, 4096)
		seen := 0
		for {
			n, err := b.Read(buf)
			if at >= seen && at < seen+n {
				buf[at-seen] ^= 0x20
			}
			seen += n
			if n > 0 {
				if _, werr := a.Write(buf[:n]); werr != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		a.Close()
	}()
	return ln.Addr().String()
}

func TestIntegrityDetectsTampering(t *testing.T) {
	s := testSecrets(t)
	dn := issue(t, s, "datanode1", RoleDatanode)
	user := issue(t, s, "alice", RoleUser)
	payload := bytes.Repeat([]byte("0123456789abcdef"), 8192) // 128 KiB: two records
	for _, lv := range []Level{Auth, Integrity} {
		// Find where the payload starts in the server→client stream.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				raw, err := ln.Accept()
				if err != nil {
					return
				}
				go func() {
					defer raw.Close()
					sc, _, err := Server(raw, lv, dn)
					if err != nil {
						return
					}
					var b [1]byte
					if _, err := io.ReadFull(sc, b[:]); err != nil {
						return
					}
					sc.Write(payload)
					io.Copy(io.Discard, sc)
				}()
			}
		}()
		// The flipped byte: inside the second record's payload (the
		// handshake is a few KiB).
		proxy := tamperProxy(t, ln.Addr().String(), 80000)
		raw, err := net.Dial("tcp", proxy)
		if err != nil {
			t.Fatal(err)
		}
		cc, err := Client(raw, lv, user, RoleDatanode)
		if err != nil {
			t.Fatalf("%s: %v", lv, err)
		}
		cc.Write([]byte{1})
		cc.SetReadDeadline(time.Now().Add(10 * time.Second))
		got, err := io.ReadAll(io.LimitReader(cc, int64(len(payload))))
		cc.Close()
		ln.Close()
		wg.Wait()
		switch lv {
		case Auth:
			// Auth protects nothing after the handshake: the change
			// arrives (this shows the proxy works).
			if err != nil || len(got) != len(payload) || bytes.Equal(got, payload) {
				t.Fatalf("auth: err %v, %d bytes, unchanged %v: the proxy did not tamper", err, len(got), bytes.Equal(got, payload))
			}
		case Integrity:
			if !errors.Is(err, ErrIntegrity) {
				t.Fatalf("integrity: err %v, want ErrIntegrity", err)
			}
			// Only records verified before the damaged one were returned.
			if len(got) >= len(payload) || !bytes.Equal(got, payload[:len(got)]) {
				t.Fatalf("integrity: %d bytes accepted, %v", len(got), bytes.Equal(got, payload[:min(len(got), len(payload))]))
			}
		}
	}
}

func testKeys() []byte {
	km := make([]byte, 64)
	for i := range km {
		km[i] = byte(i)
	}
	return km
}

// TestMACReplayReorder: records cannot be replayed, reordered, dropped or
// moved to the other direction.
func TestMACReplayReorder(t *testing.T) {
	capture := func(writes ...string) [][]byte {
		var buf bytes.Buffer
		w, _ := macWithKeys(&bufConn{w: &buf}, testKeys(), false)
		var recs [][]byte
		for _, s := range writes {
			start := buf.Len()
			w.Write([]byte(s))
			recs = append(recs, append([]byte(nil), buf.Bytes()[start:]...))
		}
		return recs
	}
	recs := capture("first", "second", "third")
	read := func(server bool, stream ...[]byte) (string, error) {
		r, _ := macWithKeys(&bufConn{r: bytes.NewReader(bytes.Join(stream, nil))}, testKeys(), server)
		b, err := io.ReadAll(r)
		return string(b), err
	}
	if got, err := read(true, recs...); err != nil || got != "firstsecondthird" {
		t.Fatalf("in order: %q %v", got, err)
	}
	for name, stream := range map[string][][]byte{
		"replayed":         {recs[0], recs[0]},
		"reordered":        {recs[0], recs[2], recs[1]},
		"dropped":          {recs[0], recs[2]},
		"truncated record": {recs[0], recs[1][:len(recs[1])-1]},
	} {
		got, err := read(true, stream...)
		if err == nil || got != "first" {
			t.Errorf("%s: read %q, err %v", name, got, err)
		}
	}
	// A client's own records sent back to it (the other direction's key).
	if got, err := read(false, recs[0]); !errors.Is(err, ErrIntegrity) || got != "" {
		t.Errorf("reflected: %q %v", got, err)
	}
}

// TestMACResumesAfterTimeout: a read deadline in the middle of a record
// leaves the stream intact (the namenode RPC interrupts waiting reads).
func TestMACResumesAfterTimeout(t *testing.T) {
	var stream bytes.Buffer
	w, _ := macWithKeys(&bufConn{w: &stream}, testKeys(), false)
	msg := bytes.Repeat([]byte("z"), 1000)
	w.Write(msg)
	w.Write([]byte("tail"))
	raw := stream.Bytes()
	for _, size := range []int{2048, 100} { // record read into the caller's buffer, or in pieces
		a, b := net.Pipe()
		r, _ := macWithKeys(b, testKeys(), true)
		go func() {
			a.Write(raw[:3]) // part of the header
			time.Sleep(50 * time.Millisecond)
			a.Write(raw[3:500]) // part of the payload
			time.Sleep(50 * time.Millisecond)
			a.Write(raw[500:])
		}()
		var got []byte
		buf := make([]byte, size)
		timeouts := 0
		for len(got) < len(msg)+4 {
			r.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
			n, err := r.Read(buf)
			got = append(got, buf[:n]...)
			if err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					timeouts++
					continue
				}
				t.Fatalf("buffer %d: after %d bytes: %v", size, len(got), err)
			}
		}
		if !bytes.Equal(got, append(msg, "tail"...)) {
			t.Fatalf("buffer %d: stream damaged by timeouts: %d bytes", size, len(got))
		}
		if timeouts == 0 {
			t.Logf("buffer %d: no timeout hit", size)
		}
		a.Close()
		b.Close()
	}
}

// bufConn is a net.Conn over a reader or a writer.
type bufConn struct {
	net.Conn
	r io.Reader
	w io.Writer
}

func (c *bufConn) Read(p []byte) (int, error)  { return c.r.Read(p) }
func (c *bufConn) Write(p []byte) (int, error) { return c.w.Write(p) }
func (c *bufConn) Close() error                { return nil }

// FuzzMACRead: no byte string from someone without the key is accepted.
func FuzzMACRead(f *testing.F) {
	var buf bytes.Buffer
	w, _ := macWithKeys(&bufConn{w: &buf}, testKeys(), false)
	w.Write([]byte("hello"))
	good := buf.Bytes()
	f.Add(good)
	f.Add([]byte{0, 0, 0, 1, 'x'})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, _ := macWithKeys(&bufConn{r: bytes.NewReader(b)}, testKeys(), true)
		got, _ := io.ReadAll(r)
		// Only (prefixes made of) the genuine record may be accepted.
		if len(got) > 0 && !(bytes.HasPrefix(b, good) && string(got) == "hello") {
			t.Fatalf("accepted %q from %x", got, b)
		}
	})
}
