package metrics

import (
	"crypto/tls"
	"net"
	"sync"
)

// sniffListener serves plain HTTP and HTTPS on one port: a connection
// whose first byte starts a TLS handshake (0x16) is served over TLS (when
// the daemon has a credential), any other in plain text. Local clients
// use plain http://; others https:// with a client certificate.
type sniffListener struct {
	net.Listener
	tls *tls.Config // nil: plain text only
}

func (l *sniffListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &sniffConn{Conn: c, conf: l.tls}, nil
}

// sniffConn decides its protocol at its first read or write (on the
// server's goroutine for the connection, under the deadlines the HTTP
// server sets), never in Accept: a silent peer holds up only itself.
type sniffConn struct {
	net.Conn // the raw connection
	conf     *tls.Config

	once  sync.Once
	inner net.Conn  // what is read and written once decided
	tc    *tls.Conn // inner, when TLS
	err   error
}

const tlsHandshakeRecord = 0x16

func (c *sniffConn) decide() error {
	c.once.Do(func() {
		var b [1]byte
		if _, c.err = c.Conn.Read(b[:]); c.err != nil {
			return
		}
		pc := &prefixedConn{Conn: c.Conn, first: b[:]}
		c.inner = pc
		if b[0] == tlsHandshakeRecord && c.conf != nil {
			c.tc = tls.Server(pc, c.conf)
			c.inner = c.tc
		}
	})
	return c.err
}

func (c *sniffConn) Read(p []byte) (int, error) {
	if err := c.decide(); err != nil {
		return 0, err
	}
	return c.inner.Read(p)
}

func (c *sniffConn) Write(p []byte) (int, error) {
	if err := c.decide(); err != nil {
		return 0, err
	}
	return c.inner.Write(p)
}

// NetConn is the raw connection (connlimit finds its own wrapper through it).
func (c *sniffConn) NetConn() net.Conn { return c.Conn }

// verified reports whether the peer showed a client certificate that the
// cluster CA signed.
func (c *sniffConn) verified() bool {
	return c.tc != nil && len(c.tc.ConnectionState().VerifiedChains) > 0
}

// prefixedConn gives back the byte read to decide before the rest.
type prefixedConn struct {
	net.Conn
	first []byte
}

func (c *prefixedConn) Read(p []byte) (int, error) {
	if len(c.first) > 0 {
		n := copy(p, c.first)
		c.first = c.first[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}
