package metrics

import (
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/plasmafs/plasma/internal/auth"
)

func get(t *testing.T, url, from string, conf *tls.Config) (int, error) {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 10 * time.Second}
	cl := &http.Client{Transport: &http.Transport{DialContext: d.DialContext, TLSClientConfig: conf}}
	defer cl.CloseIdleConnections()
	resp, err := cl.Get(url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// TestAccessRule: clients of the open networks are served in plain HTTP
// and over TLS on the same port; others only over TLS with a certificate
// of the daemon's CA.
func TestAccessRule(t *testing.T) {
	s, err := auth.InitSecrets(t.TempDir(), "c")
	if err != nil {
		t.Fatal(err)
	}
	daemon, err := s.Issue("nn", auth.RoleNamenode, nil)
	if err != nil {
		t.Fatal(err)
	}
	user, err := s.Issue("alice", auth.RoleUser, nil)
	if err != nil {
		t.Fatal(err)
	}
	a, err := StartAdmin(AdminConfig{Addr: "127.0.0.1:0", Name: "test", Credential: daemon, Open: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")},
		Log: slog.New(slog.DiscardHandler)}, NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	plain, secure := "http://"+a.Addr()+"/metrics", "https://"+a.Addr()+"/metrics"
	noCert := &tls.Config{RootCAs: daemon.CA, ServerName: "plasma"}
	withCert := &tls.Config{RootCAs: daemon.CA, ServerName: "plasma", Certificates: []tls.Certificate{user.Cert}}
	for _, c := range []struct {
		url, from string
		conf      *tls.Config
		want      int
	}{
		{plain, "127.0.0.1", nil, 200},
		{secure, "127.0.0.1", noCert, 200},
		{plain, "127.0.0.2", nil, 403},
		{secure, "127.0.0.2", noCert, 403},
		{secure, "127.0.0.2", withCert, 200},
	} {
		got, err := get(t, c.url, c.from, c.conf)
		if err != nil || got != c.want {
			t.Errorf("%s from %s (certificate: %v): %d %v, want %d", c.url, c.from, c.conf != nil && c.conf.Certificates != nil, got, err, c.want)
		}
	}
}

// TestNonLoopbackNeedsCredential: without a credential nobody outside the
// open networks could be served, so such an address is refused.
func TestNonLoopbackNeedsCredential(t *testing.T) {
	_, err := StartAdmin(AdminConfig{Addr: "0.0.0.0:0", Log: slog.New(slog.DiscardHandler)}, NewRegistry())
	if err == nil || !strings.Contains(err.Error(), "credential") {
		t.Fatalf("admin server on 0.0.0.0 without a credential: %v, want refused", err)
	}
}

// TestRecentLog keeps warnings and errors, newest first, at most n.
func TestRecentLog(t *testing.T) {
	r := NewRecentLog(2)
	log := slog.New(r.Handler(slog.DiscardHandler)).With("node", "dn1")
	log.Info("ignored")
	log.Warn("first")
	log.Error("second", "err", "boom")
	log.Warn("third")
	got := r.Records()
	if len(got) != 2 || got[0].Message != "third" || got[1].Message != "second" || got[1].Attrs != "node=dn1 err=boom" {
		t.Fatalf("records: %+v", got)
	}
}
