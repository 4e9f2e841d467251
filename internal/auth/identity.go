package auth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Role is what an identity may do beyond ordinary file access. It is
// part of the credential (the certificate's organizational unit), set by
// whoever holds the CA key when the credential is issued; nothing else
// about a credential (its user name, groups) grants any privilege.
type Role string

const (
	RoleUser      Role = "user"
	RoleSuperuser Role = "superuser" // administration: bypasses permission checks
	// Daemon roles: only these credentials carry server usage, and clients
	// refuse a server whose credential is not of the role they expect.
	// Daemons are not superusers of the namespace.
	RoleNamenode Role = "namenode"
	RoleDatanode Role = "datanode" // registers volumes and heartbeats; serves data against tickets
	// RoleTaskServer serves the MapReduce task protocol. It is a server
	// credential but no daemon of the filesystem: in PlasmaFS it is an
	// ordinary user (the tasks it runs use their submitter's delegated
	// credential, not this one).
	RoleTaskServer Role = "taskserver"
)

// Roles are the roles Issue accepts.
var Roles = []Role{RoleUser, RoleSuperuser, RoleNamenode, RoleDatanode, RoleTaskServer}

// Daemon reports whether r is the role of a filesystem server (namenode or
// datanode), which the namenode and datanodes trust beyond users.
func (r Role) Daemon() bool { return r == RoleNamenode || r == RoleDatanode }

// Server reports whether credentials of role r may act as TLS servers.
func (r Role) Server() bool { return r.Daemon() || r == RoleTaskServer }

// Identity is an authenticated principal.
type Identity struct {
	User    string
	Groups  []string
	Role    Role
	Cluster string
	// Delegated marks an identity whose certificate the namenode signed
	// for a job (Delegator), not the cluster CA: always of role user, it
	// may not ask for further delegated credentials. Job names the job it
	// was issued for.
	Delegated bool
	Job       string
	// Expires is when the credential stops being valid (the earliest
	// NotAfter of its chain); zero when unknown. Certificates are checked
	// at the handshake only, so a server that keeps a connection open
	// refuses its requests past this time (Expired).
	Expires time.Time
}

// Expired reports whether the credential id came with is no longer valid
// at now.
func (id *Identity) Expired(now time.Time) bool {
	return id != nil && !id.Expires.IsZero() && now.After(id.Expires)
}

// Super reports whether permission checks are bypassed: only for a
// credential issued with the superuser role (not for a user named root, and
// not for daemons).
func (id *Identity) Super() bool {
	return id != nil && id.Role == RoleSuperuser
}

// InGroup reports membership.
func (id *Identity) InGroup(g string) bool { return id != nil && slices.Contains(id.Groups, g) }

// PrimaryGroup is the group new files get.
func (id *Identity) PrimaryGroup() string {
	if id == nil || len(id.Groups) == 0 {
		return ""
	}
	return id.Groups[0]
}

func identityOf(cert *x509.Certificate) *Identity {
	id := &Identity{User: cert.Subject.CommonName, Groups: cert.Subject.Organization, Role: RoleUser}
	if len(cert.Subject.OrganizationalUnit) > 0 {
		id.Role = Role(cert.Subject.OrganizationalUnit[0])
	}
	if len(cert.Subject.Locality) > 0 {
		id.Cluster = cert.Subject.Locality[0]
	}
	return id
}

// identityOfChain is the identity of a verified chain, leaf first and the
// cluster CA last. A leaf the CA signed itself is what its subject says; a
// leaf signed by an intermediate (the namenode's delegation certificate) is
// delegated: whatever its subject claims, it is an ordinary user, so the
// namenode's delegation key can never make a superuser or a server.
func identityOfChain(chain []*x509.Certificate) *Identity {
	id := identityOf(chain[0])
	for _, c := range chain {
		if id.Expires.IsZero() || c.NotAfter.Before(id.Expires) {
			id.Expires = c.NotAfter
		}
	}
	if len(chain) > 2 {
		id.Role, id.Delegated = RoleUser, true
		for _, ou := range chain[0].Subject.OrganizationalUnit {
			if job, ok := strings.CutPrefix(ou, delegatedJobPrefix); ok {
				id.Job = job
			}
		}
	}
	return id
}

// Secrets are a cluster's CA and ticket key. Only administrators and the
// daemons' machines hold them.
type Secrets struct {
	Cluster   string
	CACert    *x509.Certificate
	CAKey     *ecdsa.PrivateKey
	TicketKey []byte
}

const (
	caCertFile = "ca.pem"
	caKeyFile  = "ca-key.pem"
	ticketFile = "ticket.key"
)

// InitSecrets creates a new CA and ticket key for cluster in dir.
func InitSecrets(dir, cluster string) (*Secrets, error) {
	if _, err := os.Stat(filepath.Join(dir, caKeyFile)); err == nil {
		return nil, fmt.Errorf("%s already holds cluster secrets", dir)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "plasma cluster CA " + cluster, Locality: []string{cluster}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().AddDate(20, 0, 0),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, _ := x509.ParseCertificate(der)
	tk := make([]byte, 32)
	if _, err := rand.Read(tk); err != nil {
		return nil, err
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	// Durable before they are used, the CA key last: its presence marks
	// the directory as holding secrets.
	if err := writeFilesDurably(dir, 0o600,
		fileData{caCertFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})},
		fileData{ticketFile, tk},
		fileData{caKeyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})},
	); err != nil {
		return nil, err
	}
	return &Secrets{Cluster: cluster, CACert: cert, CAKey: key, TicketKey: tk}, nil
}

// LoadSecrets reads the secrets InitSecrets wrote.
func LoadSecrets(dir string) (*Secrets, error) {
	cb, err := os.ReadFile(filepath.Join(dir, caCertFile))
	if err != nil {
		return nil, fmt.Errorf("cluster secrets: %w", err)
	}
	kb, err := os.ReadFile(filepath.Join(dir, caKeyFile))
	if err != nil {
		return nil, fmt.Errorf("cluster secrets: %w", err)
	}
	tk, err := os.ReadFile(filepath.Join(dir, ticketFile))
	if err != nil {
		return nil, fmt.Errorf("cluster secrets: %w", err)
	}
	cp, _ := pem.Decode(cb)
	kp, _ := pem.Decode(kb)
	if cp == nil || kp == nil {
		return nil, fmt.Errorf("cluster secrets in %s are damaged", dir)
	}
	cert, err := x509.ParseCertificate(cp.Bytes)
	if err != nil {
		return nil, err
	}
	key, err := x509.ParseECPrivateKey(kp.Bytes)
	if err != nil {
		return nil, err
	}
	s := &Secrets{CACert: cert, CAKey: key, TicketKey: tk}
	if len(cert.Subject.Locality) > 0 {
		s.Cluster = cert.Subject.Locality[0]
	}
	return s, nil
}

// LoadTicketKey reads only the ticket key (what namenode and datanodes need).
func LoadTicketKey(dir string) ([]byte, error) {
	tk, err := os.ReadFile(filepath.Join(dir, ticketFile))
	if err != nil {
		return nil, fmt.Errorf("ticket key: %w", err)
	}
	if len(tk) < 16 {
		return nil, errors.New("ticket key too short")
	}
	return tk, nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	return n
}

// Credential is an identity's certificate and key plus the cluster CA.
type Credential struct {
	Cert     tls.Certificate
	CA       *x509.CertPool
	Identity *Identity
	pemData  []byte
}

// Issue makes a credential for name with the given role and groups. Only
// daemon credentials (namenode, datanode) may act as TLS servers.
func (s *Secrets) Issue(name string, role Role, groups []string) (*Credential, error) {
	if name == "" {
		return nil, errors.New("empty user name")
	}
	if !slices.Contains(Roles, role) {
		return nil, fmt.Errorf("unknown role %q", role)
	}
	usage := []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	var dns []string
	if role.Server() {
		usage = append(usage, x509.ExtKeyUsageServerAuth)
		dns = []string{serverName}
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	if len(groups) == 0 {
		groups = []string{name}
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: name, Organization: groups, OrganizationalUnit: []string{string(role)}, Locality: []string{s.Cluster}},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().AddDate(10, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  usage,
		DNSNames:     dns,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, s.CACert, &key.PublicKey, s.CAKey)
	if err != nil {
		return nil, err
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	var data []byte
	data = append(data, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	data = append(data, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})...)
	data = append(data, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.CACert.Raw})...)
	return ParseCredential(data)
}

// PEM returns the credential file content.
func (c *Credential) PEM() []byte { return c.pemData }

// ParseCredential parses a credential file: certificate, key, CA; a
// delegated credential has the namenode's delegation certificate between
// its certificate and the CA.
func ParseCredential(data []byte) (*Credential, error) {
	var certs [][]byte
	var keyDER []byte
	rest := data
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		switch b.Type {
		case "CERTIFICATE":
			certs = append(certs, b.Bytes)
		case "EC PRIVATE KEY":
			keyDER = b.Bytes
		}
	}
	if len(certs) < 2 || len(certs) > 3 || keyDER == nil {
		return nil, errors.New("not a plasma credential (want certificate, key and CA certificate)")
	}
	key, err := x509.ParseECPrivateKey(keyDER)
	if err != nil {
		return nil, fmt.Errorf("credential key: %w", err)
	}
	chain := make([]*x509.Certificate, len(certs))
	for i, der := range certs {
		if chain[i], err = x509.ParseCertificate(der); err != nil {
			return nil, fmt.Errorf("credential certificate %d: %w", i+1, err)
		}
	}
	pool := x509.NewCertPool()
	pool.AddCert(chain[len(chain)-1])
	return &Credential{
		// The chain presented to peers: the certificate and any
		// intermediate, not the CA they already hold.
		Cert:     tls.Certificate{Certificate: certs[:len(certs)-1], PrivateKey: key, Leaf: chain[0]},
		CA:       pool,
		Identity: identityOfChain(chain),
		pemData:  data,
	}, nil
}

// LoadCredential reads a credential file.
func LoadCredential(path string) (*Credential, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	c, err := ParseCredential(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}
