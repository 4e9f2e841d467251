package auth

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"time"
)

// Level is a connection's security level.
type Level byte

// Levels, weakest first. A server's level is the least it accepts: a
// client may ask for a stronger one.
const (
	None      Level = 'N' // no authentication
	Auth      Level = 'A' // authenticated handshake, then plaintext: protects nothing after the handshake
	Integrity Level = 'I' // authenticated handshake, then plaintext with a MAC on every record
	Privacy   Level = 'P' // TLS 1.3 throughout: encrypted and integrity-protected
)

func (l Level) String() string {
	switch l {
	case None:
		return "none"
	case Auth:
		return "auth"
	case Integrity:
		return "integrity"
	case Privacy:
		return "privacy"
	}
	return fmt.Sprintf("level(%d)", byte(l))
}

// strength orders the levels; 0 is not a level.
func (l Level) strength() int {
	switch l {
	case None:
		return 1
	case Auth:
		return 2
	case Integrity:
		return 3
	case Privacy:
		return 4
	}
	return 0
}

// Stronger reports whether l protects more than m.
func (l Level) Stronger(m Level) bool { return l.strength() > m.strength() }

// ParseLevel parses "none", "auth", "integrity" or "privacy".
func ParseLevel(s string) (Level, error) {
	switch strings.ToLower(s) {
	case "none":
		return None, nil
	case "auth":
		return Auth, nil
	case "integrity":
		return Integrity, nil
	case "privacy":
		return Privacy, nil
	}
	return 0, fmt.Errorf("unknown security level %q (none, auth, integrity or privacy)", s)
}

// ErrAuth reports a failed handshake.
var ErrAuth = errors.New("authentication failed")

const handshakeTimeout = 10 * time.Second

// Every connection starts with one byte naming the client's level; the
// server answers 0 (go on) or 1 + a length-prefixed message and closes.
func refuse(c net.Conn, msg string) error {
	b := append([]byte{1, byte(len(msg))}, msg[:min(len(msg), 255)]...)
	c.Write(b)
	return fmt.Errorf("%w: %s", ErrAuth, msg)
}

func readVerdict(c io.Reader) error {
	var b [2]byte
	if _, err := io.ReadFull(c, b[:1]); err != nil {
		return err
	}
	if b[0] == 0 {
		return nil
	}
	if _, err := io.ReadFull(c, b[1:2]); err != nil {
		return fmt.Errorf("%w: refused", ErrAuth)
	}
	msg := make([]byte, b[1])
	io.ReadFull(c, msg)
	return fmt.Errorf("%w: %s", ErrAuth, msg)
}

// Server runs the server side of the handshake and returns the connection
// to use and the peer's identity (nil at level None). level is the least
// the server accepts; the connection runs at the level the client asks for
// if that is at least as strong.
func Server(c net.Conn, level Level, cred *Credential) (net.Conn, *Identity, error) {
	c.SetDeadline(time.Now().Add(handshakeTimeout))
	defer c.SetDeadline(time.Time{})
	var pre [1]byte
	if _, err := io.ReadFull(c, pre[:]); err != nil {
		return nil, nil, err
	}
	asked := Level(pre[0])
	if asked.strength() == 0 || asked.strength() < level.strength() {
		return nil, nil, refuse(c, fmt.Sprintf("this server requires security level %s (or stronger), the client uses %s", level, asked))
	}
	if asked == None {
		_, err := c.Write([]byte{0})
		return c, nil, err
	}
	if cred == nil {
		return nil, nil, refuse(c, "server has no credential")
	}
	if _, err := c.Write([]byte{0}); err != nil {
		return nil, nil, err
	}
	tc := tls.Server(c, &tls.Config{
		Certificates:           []tls.Certificate{cred.Cert},
		ClientAuth:             tls.RequireAndVerifyClientCert,
		ClientCAs:              cred.CA,
		MinVersion:             tls.VersionTLS13,
		SessionTicketsDisabled: true, // nothing may follow the handshake below level privacy
	})
	if err := tc.Handshake(); err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrAuth, err)
	}
	id := identityOfChain(tc.ConnectionState().VerifiedChains[0])
	var out net.Conn
	switch asked {
	case Auth:
		// Authenticated: continue in plaintext on the raw connection.
		out = c
	case Integrity:
		mc, err := newMACConn(c, tc, true)
		if err != nil {
			return nil, nil, err
		}
		out = mc
	default:
		out = tc
	}
	if _, err := out.Write([]byte{0}); err != nil {
		return nil, nil, err
	}
	return out, id, nil
}

// RoleError reports a server whose credential is not of a role the client
// expects (e.g. a user's credential posing as the namenode).
type RoleError struct {
	User string
	Role Role
	Want []Role
}

func (e *RoleError) Error() string {
	want := make([]string, len(e.Want))
	for i, r := range e.Want {
		want[i] = string(r)
	}
	return fmt.Sprintf("%v: the server presents the credential of %s (role %s), not of a %s: refusing to talk to it", ErrAuth, e.User, e.Role, strings.Join(want, " or "))
}

func (e *RoleError) Unwrap() error { return ErrAuth }

// Client runs the client side of the handshake and returns the connection
// to use. Above level None it checks that the server's credential has one
// of the roles in want (by default: namenode or datanode): only daemon
// credentials may act as servers.
func Client(c net.Conn, level Level, cred *Credential, want ...Role) (net.Conn, error) {
	c.SetDeadline(time.Now().Add(handshakeTimeout))
	defer c.SetDeadline(time.Time{})
	if level != None && cred == nil {
		return nil, fmt.Errorf("%w: security level %s needs a credential (issue one with 'plasma admin user add')", ErrAuth, level)
	}
	if level.strength() == 0 {
		return nil, fmt.Errorf("%w: unknown security level %s", ErrAuth, level)
	}
	if _, err := c.Write([]byte{byte(level)}); err != nil {
		return nil, err
	}
	if err := readVerdict(c); err != nil {
		return nil, err
	}
	if level == None {
		return c, nil
	}
	if len(want) == 0 {
		want = []Role{RoleNamenode, RoleDatanode}
	}
	checkRole := func(id *Identity) error {
		if !slices.Contains(want, id.Role) {
			return &RoleError{User: id.User, Role: id.Role, Want: want}
		}
		return nil
	}
	tc := tls.Client(c, &tls.Config{
		Certificates: []tls.Certificate{cred.Cert},
		RootCAs:      cred.CA,
		ServerName:   serverName,
		MinVersion:   tls.VersionTLS13,
		VerifyConnection: func(cs tls.ConnectionState) error {
			return checkRole(identityOfChain(cs.VerifiedChains[0]))
		},
	})
	if err := tc.Handshake(); err != nil {
		var re *RoleError
		if errors.As(err, &re) {
			return nil, re
		}
		// A user's certificate has no server usage and no server name, so
		// it fails verification before the role check: say what it is.
		var ve *tls.CertificateVerificationError
		if errors.As(err, &ve) && len(ve.UnverifiedCertificates) > 0 {
			if rerr := checkRole(identityOf(ve.UnverifiedCertificates[0])); rerr != nil {
				return nil, rerr
			}
		}
		return nil, fmt.Errorf("%w: %v (is the credential from this cluster?)", ErrAuth, err)
	}
	var conn net.Conn
	switch level {
	case Auth:
		conn = c
	case Integrity:
		mc, err := newMACConn(c, tc, false)
		if err != nil {
			return nil, err
		}
		conn = mc
	default:
		conn = tc
	}
	var ack [1]byte
	if _, err := io.ReadFull(conn, ack[:]); err != nil {
		return nil, fmt.Errorf("%w: the server refused the credential of %s: %v", ErrAuth, cred.Identity.User, err)
	}
	return conn, nil
}

// serverName is the name in every daemon certificate (daemons are found by
// address; the CA and the role say who they are).
const serverName = "plasma"
