package auth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
)

// Delegated credentials let a user's MapReduce job act as that user, and
// only as that user, on task servers, without handing them the user's own
// credential. The namenode holds a delegation certificate: an intermediate
// CA the cluster CA signed, limited to client certificates and to no
// further intermediates. On an authenticated request it signs a
// certificate for the caller's user and groups, naming the job and
// expiring at a deadline, for a key the caller made. Every verifier
// (identityOfChain) takes a certificate signed by an intermediate for an
// ordinary, delegated user whatever its subject says, and the namenode
// refuses to delegate for a delegated identity: the namenode's key can
// neither make a superuser nor a server, and a task cannot extend its
// credential.

// delegatedJobPrefix marks the organizational unit that names a delegated
// credential's job.
const delegatedJobPrefix = "job:"

// MaxDelegation is the longest lifetime of a delegated credential.
const MaxDelegation = 7 * 24 * time.Hour

// IssueDelegator makes the namenode's delegation certificate (a
// credential file: the intermediate certificate, its key and the CA).
func (s *Secrets) IssueDelegator() (*Credential, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "plasma delegation " + s.Cluster, OrganizationalUnit: []string{"delegation"}, Locality: []string{s.Cluster}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              s.CACert.NotAfter,
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		// Certificates below it may only be clients.
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, s.CACert, &key.PublicKey, s.CAKey)
	if err != nil {
		return nil, err
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	data := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	data = append(data, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})...)
	data = append(data, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.CACert.Raw})...)
	return ParseCredential(data)
}

// Delegator signs delegated credentials (the namenode's side).
type Delegator struct {
	cert *x509.Certificate
	key  crypto.Signer
	ca   *x509.Certificate
}

// LoadDelegator reads the delegation certificate IssueDelegator made.
func LoadDelegator(path string) (*Delegator, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	c, err := ParseCredential(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if !c.Cert.Leaf.IsCA {
		return nil, fmt.Errorf("%s is not a delegation certificate (make one with 'plasma cluster up' or the cluster's secrets)", path)
	}
	var ca *x509.Certificate
	if rest := c.pemData; rest != nil {
		for {
			var blk *pem.Block
			if blk, rest = pem.Decode(rest); blk == nil {
				break
			}
			if blk.Type == "CERTIFICATE" {
				ca, _ = x509.ParseCertificate(blk.Bytes)
			}
		}
	}
	key, ok := c.Cert.PrivateKey.(crypto.Signer)
	if ca == nil || !ok {
		return nil, fmt.Errorf("%s: damaged delegation certificate", path)
	}
	return &Delegator{cert: c.Cert.Leaf, key: key, ca: ca}, nil
}

// Delegate signs a certificate for public key pub naming who's user and
// groups and job, valid until notAfter (at most MaxDelegation from now,
// and no longer than who's own credential),
// and returns the chain to put in a credential: the certificate, the
// delegation certificate and the CA, in PEM.
func (d *Delegator) Delegate(who *Identity, job string, pub crypto.PublicKey, notAfter time.Time) ([]byte, error) {
	switch {
	case who == nil:
		return nil, errors.New("delegation needs an authenticated user (security level none identifies nobody)")
	case who.Delegated:
		return nil, errors.New("a delegated credential cannot ask for another")
	case who.Role != RoleUser && who.Role != RoleSuperuser:
		return nil, fmt.Errorf("credentials of role %s are not delegated", who.Role)
	case job == "" || len(job) > 128 || strings.ContainsAny(job, "\x00\n"):
		return nil, fmt.Errorf("bad job name %q", job)
	}
	now := time.Now()
	// Never beyond the caller's own credential: a delegation must not
	// extend a short-lived credential.
	for _, limit := range []time.Time{now.Add(MaxDelegation), d.cert.NotAfter, who.Expires} {
		if !limit.IsZero() && notAfter.After(limit) {
			notAfter = limit
		}
	}
	if !notAfter.After(now) {
		return nil, errors.New("the delegation would have expired already")
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject: pkix.Name{CommonName: who.User, Organization: who.Groups, Locality: []string{who.Cluster},
			OrganizationalUnit: []string{string(RoleUser), delegatedJobPrefix + job}},
		NotBefore:   now.Add(-time.Minute), // small clock differences
		NotAfter:    notAfter,
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, d.cert, pub, d.key)
	if err != nil {
		return nil, err
	}
	out := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: d.cert.Raw})...)
	return append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: d.ca.Raw})...), nil
}

// DelegationKey makes the key a delegated credential is asked for with;
// PublicKeyPEM is what goes to the namenode.
func DelegationKey() (*ecdsa.PrivateKey, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	der, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return nil, nil, err
	}
	return key, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), nil
}

// ParsePublicKey reads a public key DelegationKey wrote.
func ParsePublicKey(data []byte) (crypto.PublicKey, error) {
	b, _ := pem.Decode(data)
	if b == nil || b.Type != "PUBLIC KEY" {
		return nil, errors.New("not a PEM public key")
	}
	pub, err := x509.ParsePKIXPublicKey(b.Bytes)
	if err != nil {
		return nil, err
	}
	if _, ok := pub.(*ecdsa.PublicKey); !ok {
		return nil, errors.New("not an ECDSA public key")
	}
	return pub, nil
}

// DelegatedCredential assembles a delegated credential from the key the
// caller made and the chain the namenode signed, and checks that the chain
// leads to the CA of ca (the caller's own credential) and is for that key.
func DelegatedCredential(key *ecdsa.PrivateKey, chainPEM []byte, ca *Credential) (*Credential, error) {
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	var certs []byte
	var rest = chainPEM
	var n int
	for {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			return nil, errors.New("delegated credential: unexpected PEM block " + b.Type)
		}
		certs = append(certs, pem.EncodeToMemory(b)...)
		n++
		if n == 1 {
			// The key goes after the certificate, as in every credential.
			certs = append(certs, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})...)
		}
	}
	if n != 3 {
		return nil, fmt.Errorf("delegated credential: %d certificates, want 3", n)
	}
	c, err := ParseCredential(certs)
	if err != nil {
		return nil, err
	}
	if err := c.Verify(ca.CA); err != nil {
		return nil, err
	}
	if !c.Cert.Leaf.PublicKey.(*ecdsa.PublicKey).Equal(&key.PublicKey) {
		return nil, errors.New("delegated credential: the certificate is not for this key")
	}
	return c, nil
}

// Verify checks that c is a valid client credential now under the CA
// pool roots (e.g. a task server's, for a credential a coordinator sent),
// and sets c.Identity from the chain that verified: the credential's own
// certificates may name any chain (a full credential padded with a third
// certificate would pass for a delegated one), the verified chain is what
// servers see.
func (c *Credential) Verify(roots *x509.CertPool) error {
	inter := x509.NewCertPool()
	for _, der := range c.Cert.Certificate[1:] {
		ic, err := x509.ParseCertificate(der)
		if err != nil {
			return err
		}
		inter.AddCert(ic)
	}
	chains, err := c.Cert.Leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	if err != nil {
		return fmt.Errorf("credential of %s: %w", c.Identity.User, err)
	}
	c.Identity = identityOfChain(chains[0])
	return nil
}

// Expires is when the credential's certificate expires.
func (c *Credential) Expires() time.Time { return c.Cert.Leaf.NotAfter }
