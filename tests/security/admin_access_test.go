package security

import (
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/plasmafs/plasma/internal/auth"
	"github.com/plasmafs/plasma/internal/clustertest"
)

// adminGet fetches url through a client whose connections come from the
// local address from (an address of the loopback network other than
// 127.0.0.1 stands for a client on another host), over TLS with cred's
// certificate when cred is given; it returns the status code, or 0 and
// the error when the connection or handshake fails.
func adminGet(t *testing.T, url, from string, tlsConf *tls.Config) (int, string, error) {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 30 * time.Second}
	cl := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{DialContext: d.DialContext, TLSClientConfig: tlsConf}}
	defer cl.CloseIdleConnections()
	resp, err := cl.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

// TestAdminPortRefusesRemoteWithoutCertificate (issue 25): the namenode's
// admin port serves clients of its open networks (here 127.0.0.1 only,
// with -admin-open) without a credential; a client from elsewhere
// (127.0.0.2 standing for another host) is refused in plain HTTP and over
// TLS without a client certificate, and served over TLS with a
// certificate of the cluster CA, not with one of another CA.
func TestAdminPortRefusesRemoteWithoutCertificate(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Admin: true, Datanodes: 1, NamenodeArgs: []string{"-admin-open", "127.0.0.1/32"}})
	addr := c.NN.AdminAddr
	if code, body, err := adminGet(t, "http://"+addr+"/metrics", "127.0.0.1", nil); err != nil || code != 200 || !strings.Contains(body, "plasma_namenode_commits_total") {
		t.Fatalf("loopback client: %d %v %.200s", code, err, body)
	}
	if code, body, err := adminGet(t, "http://"+addr+"/metrics", "127.0.0.2", nil); err != nil || code != http.StatusForbidden {
		t.Fatalf("client from outside the open networks, plain HTTP: got %d %v %.200s, want 403", code, err, body)
	}
	cred, err := auth.LoadCredential(c.AdminCred)
	if err != nil {
		t.Fatal(err)
	}
	noCert := &tls.Config{RootCAs: cred.CA, ServerName: "plasma"}
	if code, body, err := adminGet(t, "https://"+addr+"/", "127.0.0.2", noCert); err != nil || code != http.StatusForbidden {
		t.Fatalf("client from outside, TLS without a certificate: got %d %v %.200s, want 403", code, err, body)
	}
	withCert := &tls.Config{RootCAs: cred.CA, ServerName: "plasma", Certificates: []tls.Certificate{cred.Cert}}
	if code, body, err := adminGet(t, "https://"+addr+"/metrics", "127.0.0.2", withCert); err != nil || code != 200 || !strings.Contains(body, "plasma_namenode_commits_total") {
		t.Fatalf("client from outside with a cluster certificate: got %d %v %.200s, want 200 with metrics", code, err, body)
	}
	other, err := auth.InitSecrets(t.TempDir(), "other")
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := other.Issue("mallory", auth.RoleSuperuser, nil)
	if err != nil {
		t.Fatal(err)
	}
	wrongCA := &tls.Config{RootCAs: cred.CA, ServerName: "plasma", Certificates: []tls.Certificate{foreign.Cert}}
	// Go's TLS client sends no certificate the server's CAs did not sign:
	// refused either way, by the handshake or with 403.
	if code, body, err := adminGet(t, "https://"+addr+"/metrics", "127.0.0.2", wrongCA); err == nil && code != http.StatusForbidden {
		t.Fatalf("client with a certificate of another CA: got %d %.200s, want it refused", code, body)
	}
}
