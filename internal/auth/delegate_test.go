package auth

import (
	"os"
	"strings"
	"testing"
	"time"
)

func delegated(t *testing.T, d *Delegator, who *Identity, job string, ca *Credential) *Credential {
	t.Helper()
	key, pub, err := DelegationKey()
	if err != nil {
		t.Fatal(err)
	}
	pk, err := ParsePublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	chain, err := d.Delegate(who, job, pk, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	c, err := DelegatedCredential(key, chain, ca)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A delegated credential authenticates its user as an ordinary, delegated
// user for its job, even when the one who asked was a superuser; it cannot
// ask for another, and it cannot serve.
func TestDelegatedIdentity(t *testing.T) {
	s := testSecrets(t)
	dc, err := s.IssueDelegator()
	if err != nil {
		t.Fatal(err)
	}
	path := t.TempDir() + "/delegation.pem"
	if err := os.WriteFile(path, dc.PEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	d, err := LoadDelegator(path)
	if err != nil {
		t.Fatal(err)
	}
	admin := issue(t, s, "root", RoleSuperuser)
	nn := issue(t, s, "namenode", RoleNamenode)
	c := delegated(t, d, admin.Identity, "job-1", admin)
	if !c.Identity.Delegated || c.Identity.Role != RoleUser || c.Identity.Job != "job-1" || c.Identity.User != "root" {
		t.Fatalf("delegated credential's own identity: %+v", c.Identity)
	}
	_, _, id, serr, cerr := pair(t, Privacy, nn, Privacy, c)
	if serr != nil || cerr != nil {
		t.Fatalf("handshake with a delegated credential: %v / %v", serr, cerr)
	}
	if id.User != "root" || id.Super() || !id.Delegated || id.Job != "job-1" {
		t.Fatalf("server sees %+v", id)
	}
	if _, err := d.Delegate(id, "job-2", c.Cert.Leaf.PublicKey, time.Now().Add(time.Hour)); err == nil || !strings.Contains(err.Error(), "delegated") {
		t.Fatalf("a delegated identity asked for another credential: %v", err)
	}
	if _, _, _, _, cerr := pair(t, Privacy, c, Privacy, admin, RoleUser, RoleTaskServer); cerr == nil {
		t.Fatal("a delegated credential served TLS")
	}
}
