package auth

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"
)

// Level is a connection's security level.
type Level byte

const (
	None    Level = 'N'
	Auth    Level = 'A'
	Privacy Level = 'P'
)

func (l Level) String() string {
	switch l {
	case None:
		return "none"
	case Auth:
		return "auth"
	case Privacy:
		return "privacy"
	}
	return fmt.Sprintf("level(%d)", byte(l))
}

// ParseLevel parses "none", "auth" or "privacy".
func ParseLevel(s string) (Level, error) {
	switch strings.ToLower(s) {
	case "none":
		return None, nil
	case "auth":
		return Auth, nil
	case "privacy":
		return Privacy, nil
	}
	return 0, fmt.Errorf("unknown security level %q (none, auth or privacy)", s)
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

// Server runs the server side of the handshake at level and returns the
// connection to use and the peer's identity (nil at level None).
func Server(c net.Conn, level Level, cred *Credential) (net.Conn, *Identity, error) {
	c.SetDeadline(time.Now().Add(handshakeTimeout))
	defer c.SetDeadline(time.Time{})
	var pre [1]byte
	if _, err := io.ReadFull(c, pre[:]); err != nil {
		return nil, nil, err
	}
	if Level(pre[0]) != level {
		return nil, nil, refuse(c, fmt.Sprintf("this server requires security level %s, the client uses %s", level, Level(pre[0])))
	}
	if level == None {
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
		SessionTicketsDisabled: true, // nothing may follow the handshake at level auth
	})
	if err := tc.Handshake(); err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrAuth, err)
	}
	peer := tc.ConnectionState().PeerCertificates[0]
	id := identityOf(peer)
	if level == Auth {
		// Authenticated: continue in plaintext on the raw connection.
		if _, err := c.Write([]byte{0}); err != nil {
			return nil, nil, err
		}
		return c, id, nil
	}
	if _, err := tc.Write([]byte{0}); err != nil {
		return nil, nil, err
	}
	return tc, id, nil
}

// Client runs the client side of the handshake and returns the connection
// to use.
func Client(c net.Conn, level Level, cred *Credential) (net.Conn, error) {
	c.SetDeadline(time.Now().Add(handshakeTimeout))
	defer c.SetDeadline(time.Time{})
	if level != None && cred == nil {
		return nil, fmt.Errorf("%w: security level %s needs a credential (issue one with 'plasma admin user add')", ErrAuth, level)
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
	tc := tls.Client(c, &tls.Config{
		Certificates: []tls.Certificate{cred.Cert},
		RootCAs:      cred.CA,
		ServerName:   "plasma",
		MinVersion:   tls.VersionTLS13,
	})
	if err := tc.Handshake(); err != nil {
		return nil, fmt.Errorf("%w: %v (is the credential from this cluster?)", ErrAuth, err)
	}
	var ack [1]byte
	var err error
	if level == Auth {
		_, err = io.ReadFull(c, ack[:])
	} else {
		_, err = io.ReadFull(tc, ack[:])
	}
	if err != nil {
		return nil, fmt.Errorf("%w: the server refused the credential of %s: %v", ErrAuth, cred.Identity.User, err)
	}
	if level == Auth {
		return c, nil
	}
	return tc, nil
}
