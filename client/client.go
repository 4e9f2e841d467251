package client

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/user"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/plasmafs/plasma/internal/auth"
	"github.com/plasmafs/plasma/internal/clientconf"
	"github.com/plasmafs/plasma/internal/rpc"
	"github.com/plasmafs/plasma/internal/wire"
)

// Client is a connection to a PlasmaFS cluster. It is safe for concurrent
// use and meant to be reused: many transactions share its one namenode
// connection.
type Client struct {
	cfg    Config
	nn     *rpc.Conn
	nextTx atomic.Uint64
	host   string
	data   *dataPool
	local  localFiles

	mu    sync.Mutex
	nodes map[uint32]wire.NodeInfo

	dataLevel auth.Level
	level     auth.Level
	cred      *auth.Credential

	// The namenode connection is replaced when it breaks; gen counts
	// replacements so transactions of a lost connection fail instead of
	// silently continuing as new ones.
	nnMu    sync.Mutex
	gen     uint64
	reqBase uint64
	// idSeed makes this client's request ids (reqID) unlike other clients'.
	idSeed  uint64
	closed  bool
	dialErr error     // of the last failed reconnection
	dialAt  time.Time // when it failed

	stopOnce      sync.Once
	stopKeepalive chan struct{}
	keepaliveDone chan struct{}
}

// New connects to the first reachable namenode of cfg.
func New(ctx context.Context, cfg Config) (*Client, error) {
	if len(cfg.Namenodes) == 0 {
		return nil, errors.New("no namenode address configured")
	}
	if cfg.User == "" {
		if u, err := user.Current(); err == nil {
			cfg.User = u.Username
		} else {
			cfg.User = "nobody"
		}
	}
	if cfg.Group == "" {
		cfg.Group = cfg.User
	}
	if cfg.Security == "" {
		cfg.Security = "privacy"
	}
	if cfg.DataSecurity == "" {
		cfg.DataSecurity = "auth"
	}
	level, err := auth.ParseLevel(cfg.Security)
	if err != nil {
		return nil, err
	}
	dataLevel, err := auth.ParseLevel(cfg.DataSecurity)
	if err != nil {
		return nil, err
	}
	cred := cfg.Credential
	if cred != nil {
		cfg.User, cfg.Group = cred.Identity.User, cred.Identity.PrimaryGroup()
	} else if cfg.CredentialFile != "" {
		if cred, err = auth.LoadCredential(cfg.CredentialFile); err != nil {
			return nil, fmt.Errorf("credential: %w", err)
		}
		cfg.User, cfg.Group = cred.Identity.User, cred.Identity.PrimaryGroup()
	} else if (level != auth.None || dataLevel != auth.None) && (cfg.Source == "-namenode" || cfg.Source == "$PLASMAFS_NAMENODES") {
		return nil, fmt.Errorf("security level %s/%s needs a credential: no cluster entry of %s lists the namenodes of %s (%s): set PLASMAFS_CREDENTIAL, or name the cluster with -cluster (issue a credential with 'plasma admin user add NAME')", cfg.Security, cfg.DataSecurity, clientconf.Path(), cfg.Source, strings.Join(cfg.Namenodes, ","))
	} else if level != auth.None || dataLevel != auth.None {
		return nil, fmt.Errorf("security level %s/%s needs a credential: set credential in %s or PLASMAFS_CREDENTIAL (issue one with 'plasma admin user add NAME')", cfg.Security, cfg.DataSecurity, clientconf.Path())
	}
	nn, err := dialNamenode(ctx, cfg.Namenodes, level, cred)
	if err != nil {
		return nil, err
	}
	host, _ := os.Hostname()
	c := &Client{cfg: cfg, nn: nn, host: host, nodes: map[uint32]wire.NodeInfo{}, dataLevel: dataLevel, level: level, cred: cred}
	c.data = newDataPool(c)
	c.nextTx.Store(uint64(time.Now().UnixNano()))
	c.idSeed = rand.Uint64()
	c.stopKeepalive = make(chan struct{})
	c.keepaliveDone = make(chan struct{})
	if cfg.KeepaliveInterval >= 0 {
		go c.keepalive()
	} else {
		close(c.keepaliveDone)
	}
	return c, nil
}

// keepalive sends one small message per interval on the namenode
// connection; it keeps every transaction of this client alive however long
// it goes without a request (a reader streaming a large file, a file held
// open in a mount). The first answer tells the namenode's transaction
// timeout, from which the interval follows.
func (c *Client) keepalive() {
	defer close(c.keepaliveDone)
	interval := c.cfg.KeepaliveInterval
	auto := interval == 0
	if auto {
		interval = 500 * time.Millisecond
	}
	t := time.NewTimer(interval)
	defer t.Stop()
	for {
		select {
		case <-c.stopKeepalive:
			return
		case <-t.C:
		}
		nn, _ := c.conn()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		r, err := nn.Keepalive(ctx, &wire.Request{Op: wire.OpKeepalive})
		cancel()
		if err != nil && errors.Is(err, rpc.ErrClosed) {
			// The namenode connection broke: replace it now, so the next
			// transaction does not find out first (the broken one's
			// transactions fail with ErrTxn as before).
			rctx, rcancel := context.WithTimeout(context.Background(), 30*time.Second)
			c.reconnect(rctx, nn)
			rcancel()
		}
		if err == nil && auto && len(r.Counters) >= 1 && r.Counters[0] > 0 {
			interval = min(time.Duration(r.Counters[0])/3, time.Minute)
			interval = max(interval, 50*time.Millisecond)
		}
		t.Reset(interval)
	}
}

// Close closes the connections; open transactions are aborted.
func (c *Client) Close() error {
	c.stopOnce.Do(func() { close(c.stopKeepalive) })
	<-c.keepaliveDone
	c.data.close()
	c.local.close()
	c.nnMu.Lock()
	defer c.nnMu.Unlock()
	c.closed = true
	return c.nn.Close()
}

// namenodeRequests returns how many requests this client has sent to the
// namenode so far (clientx.NamenodeRequests).
func (c *Client) namenodeRequests() uint64 {
	c.nnMu.Lock()
	defer c.nnMu.Unlock()
	return c.reqBase + c.nn.Requests()
}

func (c *Client) conn() (*rpc.Conn, uint64) {
	c.nnMu.Lock()
	defer c.nnMu.Unlock()
	return c.nn, c.gen
}

// redialPause is how long after a failed reconnection reconnect fails
// again at once, without dialing.
const redialPause = 20 * time.Millisecond

// reconnect replaces a broken namenode connection (once per breakage).
func (c *Client) reconnect(ctx context.Context, broken *rpc.Conn) error {
	c.nnMu.Lock()
	defer c.nnMu.Unlock()
	if c.closed {
		return rpc.ErrClosed
	}
	if c.nn != broken {
		return nil // someone else already did
	}
	if c.dialErr != nil && time.Since(c.dialAt) < redialPause {
		// Callers waiting for a restarting namenode all retry: one dial
		// per pause is enough to find it back.
		return c.dialErr
	}
	nn, err := dialNamenode(ctx, c.cfg.Namenodes, c.level, c.cred)
	if err != nil {
		c.dialErr, c.dialAt = err, time.Now()
		c.nn.FailWith(fmt.Errorf("%w: %w", rpc.ErrClosed, err)) // later calls on it say why
		return c.dialErr
	}
	c.reqBase += c.nn.Requests()
	c.nn, c.dialErr = nn, nil
	c.gen++
	return nil
}

// call sends q; outside a transaction, a broken connection is replaced
// and the call sent again once.
func (c *Client) call(ctx context.Context, q *wire.Request) (*wire.Response, error) {
	if q.ReqID == 0 {
		q.ReqID = c.reqID(c.nextTx.Add(1))
	}
	nn, _ := c.conn()
	r, err := nn.Call(ctx, q)
	if err == nil && r.Code == wire.ErrCodeNotLeader && q.Txn == 0 && len(c.cfg.Namenodes) > 1 {
		err = c.leaderMoved(nn, r) // namenodes.go: a group's leader changed
	}
	if err != nil && errors.Is(err, rpc.ErrClosed) && q.Txn == 0 {
		if rerr := c.reconnect(ctx, nn); rerr == nil {
			nn, _ = c.conn()
			r, err = nn.Call(ctx, q)
		}
	}
	if err != nil {
		return nil, err
	}
	return r, withReqID(c.noteResponse(r), q.ReqID)
}

// noteResponse records the datanodes a response describes and turns its
// error code into an error.
func (c *Client) noteResponse(r *wire.Response) error {
	if len(r.Nodes) > 0 {
		c.mu.Lock()
		for _, n := range r.Nodes {
			if old, ok := c.nodes[n.ID]; ok && n.Addr == "" {
				// A restarted namenode knows a datanode's address only once
				// it registers again; until then the one known is kept, so
				// the datanode (up all the while) can still be read.
				n.Addr = old.Addr
			}
			c.nodes[n.ID] = n
		}
		c.mu.Unlock()
	}
	return respErr(r)
}

// identityAt returns the identity of the datanode serving addr.
func (c *Client) identityAt(addr string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.nodes {
		if n.Addr == addr {
			return n.Identity
		}
	}
	return ""
}

func (c *Client) node(id uint32) (wire.NodeInfo, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, ok := c.nodes[id]
	return n, ok
}

// Begin opens a transaction. Transactions cost nothing until their first
// request; the namenode aborts them when the connection closes.
func (c *Client) Begin() *Txn {
	return &Txn{c: c, id: c.nextTx.Add(1)}
}

// TxnAttempts bounds how often Client.Txn runs its function.
const TxnAttempts = 100

// Txn runs fn in a transaction and commits it, re-running fn in a new
// transaction when it fails with ErrConflict (up to TxnAttempts times, with
// randomised exponential backoff capped at 50ms). fn must be safe to run
// more than once.
func (c *Client) Txn(ctx context.Context, fn func(ctx context.Context, tx *Txn) error) error {
	var err error
	for attempt := 0; attempt < TxnAttempts; attempt++ {
		if attempt > 0 {
			d := min(time.Duration(1<<min(attempt, 16))*100*time.Microsecond, 50*time.Millisecond)
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(d/2 + rand.N(d/2+1)):
			}
		}
		tx := c.Begin()
		err = fn(ctx, tx)
		if err == nil {
			err = tx.Commit(ctx)
		} else {
			tx.Abort(ctx)
		}
		if !errors.Is(err, ErrConflict) {
			return err
		}
	}
	return err
}

// Lookup resolves path outside any transaction: one round trip, reading
// the latest committed state.
func (c *Client) Lookup(ctx context.Context, path string) (FileInfo, error) {
	r, err := c.call(ctx, &wire.Request{Op: wire.OpLookup, Path: path})
	if err != nil {
		return FileInfo{}, err
	}
	return infoOf(r.Attr), nil
}

// Sync returns once every commit acknowledged before it (by any client)
// is durable.
func (c *Client) Sync(ctx context.Context) error {
	_, err := c.call(ctx, &wire.Request{Op: wire.OpSync})
	return err
}

// Ping makes one empty round trip to the namenode.
func (c *Client) Ping(ctx context.Context) error {
	_, err := c.call(ctx, &wire.Request{Op: wire.OpPing})
	return err
}

// FsStat describes the filesystem as a whole.
type FsStat struct {
	Blocksize     uint32
	TotalBlocks   uint64
	UsedBlocks    uint64
	FreeBlocks    uint64
	Files         uint64
	Dirs          uint64
	Datanodes     uint64
	LiveDatanodes uint64
	OpenTxns      uint64
	// Set by namenodes that report them (zero values otherwise): the
	// replication of files created with replication 0, the least
	// security level the namenode accepts, and the cluster's name.
	DefaultRep      int
	NamenodeLevel   string
	NamenodeCluster string
}

// FsStat returns filesystem totals.
func (c *Client) FsStat(ctx context.Context) (FsStat, error) {
	r, err := c.call(ctx, &wire.Request{Op: wire.OpFsStat})
	if err != nil {
		return FsStat{}, err
	}
	v := r.Counters
	if len(v) < 9 {
		return FsStat{}, fmt.Errorf("namenode returned %d counters", len(v))
	}
	st := FsStat{Blocksize: uint32(v[0]), TotalBlocks: v[1], UsedBlocks: v[2], FreeBlocks: v[3], Files: v[4], Dirs: v[5], Datanodes: v[6], LiveDatanodes: v[7], OpenTxns: v[8]}
	if len(v) >= 11 {
		st.DefaultRep, st.NamenodeLevel = int(v[9]), auth.Level(v[10]).String()
	}
	if len(r.Paths) > 0 {
		st.NamenodeCluster = r.Paths[0]
	}
	return st, nil
}

// Datanode describes a datanode volume.
type Datanode struct {
	ID        uint32
	Identity  string // the volume's identity
	Cluster   string
	Namespace string // the namespace the volume belongs to
	Addr      string // data protocol address
	Host      string
	Blocksize int
	Blocks    uint64 // capacity
	Used      uint64
	Alive     bool // heartbeats arrive
	Enabled   bool
}

// Datanodes lists the datanodes the namenode knows.
func (c *Client) Datanodes(ctx context.Context) ([]Datanode, error) {
	r, err := c.call(ctx, &wire.Request{Op: wire.OpNodes})
	if err != nil {
		return nil, err
	}
	out := make([]Datanode, len(r.Nodes))
	for i, n := range r.Nodes {
		out[i] = datanodeOf(n)
	}
	return out, nil
}

func datanodeOf(n wire.NodeInfo) Datanode {
	return Datanode{ID: n.ID, Identity: n.Identity, Cluster: n.Cluster, Namespace: n.Namespace, Addr: n.Addr, Host: n.Host,
		Blocksize: int(n.Blocksize), Blocks: n.Blocks, Used: n.Used, Alive: n.Alive, Enabled: n.Enabled}
}

// reqID turns a number unique in this client (a transaction id) into a
// request id unlikely to be any other client's (splitmix64's mixing of
// the client's random seed plus n): cheap, no allocation.
func (c *Client) reqID(n uint64) uint64 {
	z := c.idSeed + n*0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// namenodeAddr returns the address of the namenode the client is
// connected to (clientx.NamenodeAddr).
func (c *Client) namenodeAddr() string {
	nn, _ := c.conn()
	return nn.Addr()
}
