package security

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"testing"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/auth"
	"github.com/plasmafs/plasma/internal/clustertest"
)

// TestDelegationEndsWithItsUsersCredential: a user whose own credential
// expires in an hour (an administrator issued a short-lived one) cannot
// turn it into a delegated credential valid for a day: a delegated
// credential ends no later than the credential that asked for it.
func TestDelegationEndsWithItsUsersCredential(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	ends := time.Now().Add(time.Hour).Truncate(time.Second)
	short := shortCredential(t, c.Secrets, "alice", ends)
	alice := c.Client(client.Config{Credential: short})
	defer alice.Close()
	d, err := alice.Delegate(context.Background(), "job-long", 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if d.Expires().After(ends) {
		t.Errorf("alice's credential ends at %s, the one delegated to her job at %s", ends.UTC(), d.Expires().UTC())
	}
}

// shortCredential is a user credential signed by the cluster CA that
// expires at notAfter.
func shortCredential(t *testing.T, s *auth.Secrets, user string, notAfter time.Time) *auth.Credential {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: user, Organization: []string{user}, OrganizationalUnit: []string{string(auth.RoleUser)}, Locality: []string{s.Cluster}},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, s.CACert, &key.PublicKey, s.CAKey)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	data := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	data = append(data, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})...)
	data = append(data, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.CACert.Raw})...)
	cred, err := auth.ParseCredential(data)
	if err != nil {
		t.Fatal(err)
	}
	return cred
}
