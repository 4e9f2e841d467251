package mrexec

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/auth"
)

// secureListener hands out connections that run the cluster's handshake
// (auth.Server) on their first read or write, in the connection's own
// goroutine, so a slow peer holds up nobody else's accept.
type secureListener struct {
	net.Listener
	level auth.Level
	cred  *auth.Credential
}

func (l *secureListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &secureConn{Conn: c, level: l.level, cred: l.cred}, nil
}

// secureConn is a connection whose handshake runs on first use.
type secureConn struct {
	net.Conn // the raw connection
	level    auth.Level
	cred     *auth.Credential
	once     sync.Once
	sc       net.Conn       // after the handshake
	who      *auth.Identity // the peer (nil at level none)
	err      error
	mu       sync.Mutex
	readDL   time.Time // the caller's read deadline, restored after the handshake
}

// NetConn is the accepted connection under the handshake (for
// connlimit.Admit and SetIdle).
func (c *secureConn) NetConn() net.Conn { return c.Conn }

func (c *secureConn) handshake() error {
	c.once.Do(func() {
		c.sc, c.who, c.err = auth.Server(c.Conn, c.level, c.cred)
		if c.err != nil {
			c.Conn.Close()
			return
		}
		c.mu.Lock()
		c.Conn.SetReadDeadline(c.readDL)
		c.mu.Unlock()
	})
	return c.err
}

func (c *secureConn) Read(p []byte) (int, error) {
	if err := c.handshake(); err != nil {
		return 0, err
	}
	return c.sc.Read(p)
}

func (c *secureConn) Write(p []byte) (int, error) {
	if err := c.handshake(); err != nil {
		return 0, err
	}
	return c.sc.Write(p)
}

func (c *secureConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	c.readDL = t
	c.mu.Unlock()
	return c.Conn.SetReadDeadline(t)
}

func (c *secureConn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	c.readDL = t
	c.mu.Unlock()
	return c.Conn.SetDeadline(t)
}

// peerKey is the request context key of the request's secureConn.
type peerKey struct{}

// peerOf is the authenticated peer of a request (nil at level none).
func peerOf(ctx context.Context) *auth.Identity {
	if c, ok := ctx.Value(peerKey{}).(*secureConn); ok && c.handshake() == nil {
		return c.who
	}
	return nil
}

// jobClients holds one client per delegated credential while tasks of its
// job run, and closes it (forgetting the credential) when the last ends.
type jobClients struct {
	cfg client.Config // the cluster's, without a credential
	ca  *auth.Credential
	mu  sync.Mutex
	m   map[[32]byte]*jobClient
}

type jobClient struct {
	c      *client.Client
	users  int
	ready  chan struct{} // closed once c (or err) is set
	err    error
	expire *time.Timer // closes c when the credential expires
	once   sync.Once
}

// close closes the client, once: when the job's last task here ends or
// the credential expires, whichever comes first (a task still running
// then fails: its credential is no longer valid).
func (jc *jobClient) close() {
	jc.once.Do(func() {
		if jc.expire != nil {
			jc.expire.Stop()
		}
		if jc.c != nil {
			jc.c.Close()
		}
	})
}

func newJobClients(cfg client.Config, own *auth.Credential) *jobClients {
	cfg.CredentialFile, cfg.Credential = "", nil
	return &jobClients{cfg: cfg, ca: own, m: map[[32]byte]*jobClient{}}
}

// checkDelegated says why credential pem may not run task t for peer, if
// it may not: it must be a delegated credential of this cluster, for t's
// job, of the user who sent the task, and not expired.
func (j *jobClients) checkDelegated(pem []byte, t Task, peer *auth.Identity) (*auth.Credential, error) {
	if len(pem) == 0 {
		return nil, errors.New("the task carries no delegated credential: this task server runs tasks only with their submitter's (a 'plasma mr run' of this version asks the namenode for one)")
	}
	cred, err := auth.ParseCredential(pem)
	if err != nil {
		return nil, fmt.Errorf("the task's credential: %w", err)
	}
	// Verified first: the identity is then the verified chain's.
	if err := cred.Verify(j.ca.CA); err != nil {
		return nil, err
	}
	id := cred.Identity
	switch {
	case !id.Delegated:
		return nil, fmt.Errorf("the task's credential (of %s) is not a delegated one: task servers take only credentials the namenode delegated for the job", id.User)
	case id.Job != t.Job:
		return nil, fmt.Errorf("the task's credential was delegated for job %s, not %s", id.Job, t.Job)
	case peer == nil:
		return nil, fmt.Errorf("the task's credential is %s's, but an unauthenticated peer sent it", id.User)
	case peer.User != id.User:
		return nil, fmt.Errorf("the task's credential is %s's, but %s sent it", id.User, peer.User)
	}
	return cred, nil
}

// acquire returns the client of t's delegated credential and the function
// to call when the attempt ends.
func (j *jobClients) acquire(ctx context.Context, t Task, peer *auth.Identity) (*client.Client, func(), error) {
	cred, err := j.checkDelegated(t.Credential, t, peer)
	if err != nil {
		return nil, nil, err
	}
	key := sha256.Sum256(cred.Cert.Certificate[0])
	j.mu.Lock()
	jc := j.m[key]
	first := jc == nil
	if first {
		jc = &jobClient{ready: make(chan struct{})}
		j.m[key] = jc
	}
	jc.users++
	j.mu.Unlock()
	release := func() {
		j.mu.Lock()
		jc.users--
		last := jc.users == 0
		if last {
			delete(j.m, key)
		}
		j.mu.Unlock()
		if last {
			jc.close()
		}
	}
	if first {
		cfg := j.cfg
		cfg.Credential = cred
		jc.c, jc.err = client.New(context.WithoutCancel(ctx), cfg)
		if jc.err == nil {
			jc.expire = time.AfterFunc(time.Until(cred.Expires()), jc.close)
		}
		close(jc.ready)
	} else {
		<-jc.ready
	}
	if jc.err != nil {
		release()
		return nil, nil, fmt.Errorf("connect as %s: %w", cred.Identity.User, jc.err)
	}
	return jc.c, release, nil
}
