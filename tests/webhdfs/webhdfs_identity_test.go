package webhdfs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/plasmafs/plasma/internal/auth"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestWebHDFSPermissions: the gateway serves pseudo-authenticated users
// with the namenode's permission rules although its own credential is a
// superuser's: no reading another user's 0600 file, no creating in or
// listing or traversing a directory without the bits, no chmod of
// another's file, no giving a file away, chgrp only to one's own group,
// the sticky bit, and a recursive delete that meets a directory it may
// not empty deletes nothing. What a user creates is theirs.
func TestWebHDFSPermissions(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	c.MustRun("mkdir", "/bob", "/shared", "/tree", "/tree/locked")
	c.MustRun("chown", "bob:bob", "/bob", "/tree", "/tree/locked")
	c.MustRun("chmod", "700", "/bob")
	c.MustRun("chmod", "1777", "/shared")
	c.MustRun("chmod", "777", "/tree")
	c.MustRun("chmod", "555", "/tree/locked")
	testkit.PutOwned(t, c, "/secret", "root's\n", "", "600")
	testkit.PutOwned(t, c, "/bob/f", "bob's\n", "bob:bob", "644")
	testkit.PutOwned(t, c, "/shared/bobs", "bob's\n", "bob:bob", "666")
	testkit.PutOwned(t, c, "/tree/locked/f", "x", "bob:bob", "666")
	testkit.PutOwned(t, c, "/tree/g", "x", "bob:bob", "666")
	g := startWebHDFS(t, c)
	as := func(user, p, op string, kv ...string) string {
		return g.url(p, op, append([]string{"user.name", user}, kv...)...)
	}
	denied := func(what, method, url string) {
		t.Helper()
		wantException(t, what, webhdfsDo(t, method, url, nil), 403, "AccessControlException")
	}
	denied("alice reads root's 0600 file", "GET", as("alice", "/secret", "OPEN"))
	denied("alice creates in root's 0755 directory", "PUT", as("alice", "/mine", "CREATE", "data", "true"))
	denied("alice makes a directory in root's 0755 directory", "PUT", as("alice", "/mine", "MKDIRS"))
	denied("alice lists bob's 0700 directory", "GET", as("alice", "/bob", "LISTSTATUS"))
	denied("alice looks into bob's 0700 directory", "GET", as("alice", "/bob/f", "GETFILESTATUS"))
	denied("alice chmods bob's file", "PUT", as("alice", "/shared/bobs", "SETPERMISSION", "permission", "777"))
	denied("alice deletes bob's file in a sticky directory", "DELETE", as("alice", "/shared/bobs", "DELETE"))
	denied("alice renames bob's file out of a sticky directory", "PUT", as("alice", "/shared/bobs", "RENAME", "destination", "/shared/mine"))
	denied("alice appends to root's file", "POST", as("alice", "/secret", "APPEND", "data", "true"))
	denied("alice sets the times of root's file", "PUT", as("alice", "/secret", "SETTIMES", "modificationtime", "0"))
	denied("alice sets the replication of root's file", "PUT", as("alice", "/secret", "SETREPLICATION", "replication", "1"))
	denied("alice deletes a tree with a directory she may not empty", "DELETE", as("alice", "/tree", "DELETE", "recursive", "true"))
	if !plasmaExists(t, c, "/tree/g") || !plasmaExists(t, c, "/tree/locked/f") {
		t.Error("a refused recursive delete removed part of the tree")
	}

	// What alice creates is hers; she may not give it away, but may
	// change its group to her own.
	if r := webhdfsDo(t, "PUT", as("alice", "/shared/hers", "CREATE", "data", "true"), strings.NewReader("alice's\n")); r.Status != 201 {
		t.Fatalf("alice CREATE in a 1777 directory: %d %s", r.Status, r.Body)
	}
	if got := testkit.PlasmaOwner(t, c, "/shared/hers"); got != "alice:alice" {
		t.Errorf("alice's file belongs to %s", got)
	}
	denied("alice gives her file to bob", "PUT", as("alice", "/shared/hers", "SETOWNER", "owner", "bob"))
	denied("alice gives her file bob's group", "PUT", as("alice", "/shared/hers", "SETOWNER", "group", "bob"))
	denied("bob deletes alice's file in a sticky directory", "DELETE", as("bob", "/shared/hers", "DELETE"))
	// Bob may do what alice may not, on his own files.
	if r := webhdfsDo(t, "GET", as("bob", "/bob/f", "OPEN"), nil); r.Status != 200 || string(r.Body) != "bob's\n" {
		t.Errorf("bob reads his own file: %d %s", r.Status, r.Body)
	}
	if r := webhdfsDo(t, "DELETE", as("bob", "/shared/bobs", "DELETE"), nil); r.Status != 200 || plasmaExists(t, c, "/shared/bobs") {
		t.Errorf("bob deletes his own file in the sticky directory: %d %s", r.Status, r.Body)
	}
	// Root is no superuser by name (only a superuser credential is).
	denied("a user named root gives root's file away", "PUT", as("root", "/secret", "SETOWNER", "owner", "alice"))
}

// TestWebHDFSPseudoAuthTrust: user.name is believed from loopback only,
// and from the addresses of -trusted-proxies: a request from another
// address of this machine gets 401 SecurityException, until that address
// is trusted.
func TestWebHDFSPseudoAuthTrust(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	ip := nonLoopbackIPv4(t)
	open := startWebHDFS(t, c, "-listen", "0.0.0.0:0")
	port := open.URL[strings.LastIndex(open.URL, ":")+1:]
	remote := &webhdfsGateway{URL: "http://" + net.JoinHostPort(ip, port)}
	r := webhdfsDo(t, "GET", remote.url("/", "GETFILESTATUS", "user.name", "alice"), nil)
	wantException(t, "pseudo authentication from "+ip, r, 401, "SecurityException")
	if r := webhdfsDo(t, "GET", open.url("/", "GETFILESTATUS", "user.name", "alice"), nil); r.Status != 200 {
		t.Errorf("pseudo authentication from loopback: %d %s", r.Status, r.Body)
	}
	wantException(t, "no user.name from loopback", webhdfsDo(t, "GET", open.url("/", "GETFILESTATUS"), nil), 401, "SecurityException")
	wantException(t, "doas another user", webhdfsDo(t, "GET", open.url("/", "GETFILESTATUS", "user.name", "alice", "doas", "bob"), nil), 403, "AccessControlException")

	trusting := startWebHDFS(t, c, "-listen", "0.0.0.0:0", "-trusted-proxies", ip)
	port = trusting.URL[strings.LastIndex(trusting.URL, ":")+1:]
	remote = &webhdfsGateway{URL: "http://" + net.JoinHostPort(ip, port)}
	if r := webhdfsDo(t, "GET", remote.url("/", "GETFILESTATUS", "user.name", "alice"), nil); r.Status != 200 {
		t.Errorf("pseudo authentication from a trusted proxy %s: %d %s", ip, r.Status, r.Body)
	}
}

// TestWebHDFSClientCertificates: over https (-tls-cert), a client
// certificate issued by the cluster CA says who the caller is, whatever
// user.name claims, from any address; curl uses it for the redirect
// protocol; a superuser certificate may do what users may not; a
// certificate of another CA is refused in the handshake; without a
// certificate, another address gets 401.
func TestWebHDFSClientCertificates(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	c.MustRun("chmod", "777", "/")
	testkit.PutOwned(t, c, "/secret", "root's\n", "", "600")
	ip := nonLoopbackIPv4(t)
	dir := t.TempDir()
	certFile, keyFile := webhdfsServerCert(t, c, dir, ip)
	g := startWebHDFS(t, c, "-listen", "0.0.0.0:0", "-tls-cert", certFile, "-tls-key", keyFile)
	if !strings.HasPrefix(g.URL, "https://") {
		t.Fatalf("gateway with -tls-cert serves %s", g.URL)
	}
	port := g.URL[strings.LastIndex(g.URL, ":")+1:]
	remote := &webhdfsGateway{URL: "https://" + net.JoinHostPort(ip, port)}
	caFile := filepath.Join(dir, "ca.pem")
	testkit.MustOK(t, "write CA", os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Secrets.CACert.Raw}), 0o644))
	carol := c.IssueCredential("carol", auth.RoleUser)

	// curl with carol's certificate, from the non-loopback address,
	// claiming to be alice: served as carol.
	body := filepath.Join(dir, "body")
	testkit.MustOK(t, "write", os.WriteFile(body, []byte("carol's\n"), 0o644))
	got := curl(t, "--cacert", caFile, "--cert", carol, "-L", "-X", "PUT", "-T", body, "-o", "/dev/null", "-w", "%{http_code}",
		remote.url("/carols", "CREATE", "user.name", "alice"))
	if got != "201" {
		t.Fatalf("curl CREATE with a client certificate: status %s", got)
	}
	if owner := testkit.PlasmaOwner(t, c, "/carols"); owner != "carol:carol" {
		t.Errorf("a file created with carol's certificate (user.name=alice) belongs to %s", owner)
	}
	if got := curl(t, "--cacert", caFile, "--cert", carol, remote.url("/", "GETHOMEDIRECTORY")); !strings.Contains(got, `"/user/carol"`) {
		t.Errorf("GETHOMEDIRECTORY with carol's certificate: %s", got)
	}
	// fsspec over https with carol's credential file (certificate and key).
	needPythonPackages(t, "fsspec", "requests")
	script := `import fsspec, sys
fs = fsspec.filesystem("webhdfs", host=sys.argv[1], port=int(sys.argv[2]), use_https=True, session_cert=sys.argv[3], session_verify=sys.argv[4])
with fs.open("/by-fsspec", "wb") as f:
    f.write(b"over https\n")
assert fs.cat_file("/carols") == b"carol's\n"
print("OK")`
	py := exec.Command("python3", "-c", script, ip, port, carol, caFile)
	// requests prefers these to the session's CA file (psf/requests#3829).
	py.Env = withoutEnv(os.Environ(), "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE")
	if out, err := py.CombinedOutput(); err != nil || string(out) != "OK\n" {
		t.Fatalf("fsspec over https with a client certificate: %v\n%s", err, out)
	}
	if owner := testkit.PlasmaOwner(t, c, "/by-fsspec"); owner != "carol:carol" {
		t.Errorf("a file fsspec wrote with carol's certificate belongs to %s", owner)
	}
	carolClient := webhdfsTLSClient(t, caFile, carol)
	if r := tlsDo(t, carolClient, "GET", remote.url("/secret", "OPEN")); r.Status != 403 || r.exception() != "AccessControlException" {
		t.Errorf("carol reads root's 0600 file: %d %s", r.Status, r.Body)
	}
	admin := webhdfsTLSClient(t, caFile, c.AdminCred)
	if r := tlsDo(t, admin, "GET", remote.url("/secret", "OPEN")); r.Status != 200 || string(r.Body) != "root's\n" {
		t.Errorf("a superuser certificate reads root's 0600 file: %d %s", r.Status, r.Body)
	}
	if r := tlsDo(t, admin, "PUT", remote.url("/carols", "SETOWNER", "owner", "dave")); r.Status != 200 || testkit.PlasmaOwner(t, c, "/carols") != "dave:carol" {
		t.Errorf("a superuser certificate gives carol's file to dave: %d %s", r.Status, r.Body)
	}

	// No certificate, not loopback: refused; loopback pseudo auth works.
	anon := webhdfsTLSClient(t, caFile, "")
	if r := tlsDo(t, anon, "GET", remote.url("/", "GETFILESTATUS", "user.name", "alice")); r.Status != 401 || r.exception() != "SecurityException" {
		t.Errorf("https without a certificate from %s: %d %s", ip, r.Status, r.Body)
	}
	local := &webhdfsGateway{URL: "https://" + net.JoinHostPort("127.0.0.1", port)}
	if r := tlsDo(t, anon, "GET", local.url("/", "GETFILESTATUS", "user.name", "alice")); r.Status != 200 {
		t.Errorf("https pseudo authentication from loopback: %d %s", r.Status, r.Body)
	}

	// A certificate of another cluster's CA: refused in the handshake.
	other, err := auth.InitSecrets(filepath.Join(dir, "other"), "other")
	testkit.MustOK(t, "other CA", err)
	cred, err := other.Issue("mallory", auth.RoleSuperuser, nil)
	testkit.MustOK(t, "other credential", err)
	foreign := filepath.Join(dir, "mallory.pem")
	testkit.MustOK(t, "write", os.WriteFile(foreign, cred.PEM(), 0o600))
	// (Go's TLS client does not even offer a certificate the server's CA
	// list does not name: then the request goes without one.)
	if resp, err := webhdfsTLSClient(t, caFile, foreign).Get(remote.url("/secret", "OPEN")); err == nil {
		resp.Body.Close()
		if resp.StatusCode != 401 {
			t.Errorf("a certificate of another CA: status %d, want a refused handshake or 401", resp.StatusCode)
		}
	}
	if out, err := exec.Command("curl", "-sS", "--cacert", caFile, "--cert", foreign, "-o", "/dev/null", "-w", "%{http_code}",
		remote.url("/secret", "OPEN")).CombinedOutput(); err == nil && string(out) != "401" {
		t.Errorf("curl with a certificate of another CA: %s, want a refused handshake or 401", out)
	}
}

func nonLoopbackIPv4(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	testkit.MustOK(t, "interface addresses", err)
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
			return n.IP.String()
		}
	}
	t.Fatal("this test needs an IPv4 address other than loopback on this machine")
	return ""
}

// webhdfsServerCert makes a server certificate for 127.0.0.1 and ip,
// signed by the cluster CA (a site would use its own).
func webhdfsServerCert(t *testing.T, c *clustertest.Procs, dir, ip string) (string, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	testkit.MustOK(t, "key", err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: "webhdfs gateway"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(ip)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.Secrets.CACert, &key.PublicKey, c.Secrets.CAKey)
	testkit.MustOK(t, "certificate", err)
	kder, err := x509.MarshalECPrivateKey(key)
	testkit.MustOK(t, "key", err)
	certFile, keyFile := filepath.Join(dir, "gw.pem"), filepath.Join(dir, "gw-key.pem")
	testkit.MustOK(t, "write", os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644))
	testkit.MustOK(t, "write", os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600))
	return certFile, keyFile
}

// webhdfsTLSClient trusts caFile and presents the credential credFile
// ("" for none); redirects are not followed.
func webhdfsTLSClient(t *testing.T, caFile, credFile string) *http.Client {
	t.Helper()
	pool := x509.NewCertPool()
	b, err := os.ReadFile(caFile)
	testkit.MustOK(t, "read CA", err)
	pool.AppendCertsFromPEM(b)
	conf := &tls.Config{RootCAs: pool}
	if credFile != "" {
		cred, err := auth.LoadCredential(credFile)
		testkit.MustOK(t, "credential", err)
		conf.Certificates = []tls.Certificate{cred.Cert}
	}
	return &http.Client{
		Transport:     &http.Transport{TLSClientConfig: conf},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

func tlsDo(t *testing.T, cl *http.Client, method, url string) webhdfsReply {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	testkit.MustOK(t, "request", err)
	resp, err := cl.Do(req)
	testkit.MustOK(t, method+" "+url, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	testkit.MustOK(t, "read answer", err)
	return webhdfsReply{Status: resp.StatusCode, Body: b, Location: resp.Header.Get("Location")}
}

// withoutEnv returns env without the variables names.
func withoutEnv(env []string, names ...string) []string {
	var out []string
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(names, name) {
			out = append(out, kv)
		}
	}
	return out
}
