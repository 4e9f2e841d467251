package namenode

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/plasmafs/plasma/internal/auth"
	"github.com/plasmafs/plasma/internal/commitlog"
	"github.com/plasmafs/plasma/internal/connlimit"
	"github.com/plasmafs/plasma/internal/meta"
	"github.com/plasmafs/plasma/internal/wire"
)

// Config configures a namenode.
type Config struct {
	Cluster   string
	Blocksize uint32
	Store     meta.Store
	// Fresh: the namespace was created just now (-format), so no earlier
	// namenode granted directory leases in it and additions need not wait
	// out their term at start-up.
	Fresh bool
	// TxnTimeout aborts a transaction that made no request for this long.
	TxnTimeout time.Duration
	// LeaseTerm is the length of a directory lease (default
	// DefaultLeaseTerm): longer saves more lookups to the holder and makes
	// others' additions to a leased directory wait that much longer. A
	// namenode waits one term at start-up for its predecessor's leases,
	// so a term shorter than the predecessor's is safe only once the old
	// term has passed since the predecessor stopped.
	LeaseTerm time.Duration
	// HeartbeatTimeout declares a datanode dead after this long without a
	// heartbeat (a closed connection declares it dead at once).
	HeartbeatTimeout time.Duration
	// DeadAfter is how long a datanode may be dead before its replicas
	// are replaced by copies on the others (default 10 minutes); until
	// then they count, as it may come back.
	DeadAfter time.Duration
	// CopiesPerNode bounds the re-replication copies (of up to 32 blocks
	// each) a datanode takes part in at a time, as source or destination
	// (default 2), so user traffic keeps flowing.
	CopiesPerNode int
	// DataSecurity is the level the namenode uses on the datanodes' data
	// ports, to ask for copies (default: Security).
	DataSecurity auth.Level
	// DefaultRep is the replication used when a client asks for 0.
	DefaultRep uint8
	Logger     *slog.Logger

	// Security is the level clients and datanodes must connect with;
	// Credential is the namenode's own (needed above None).
	Security   auth.Level
	Credential *auth.Credential
	// TicketKey, shared with the datanodes, makes datanode tickets; nil
	// issues none (datanodes at level none do not check them).
	TicketKey      []byte
	TicketLifetime time.Duration
	// Delegator signs credentials delegated to a user's jobs (OpDelegate);
	// nil refuses them.
	Delegator *auth.Delegator
	// Limits against misbehaving clients.
	MaxConns       int // connections (default 4096)
	MaxTxnsPerConn int // open transactions per connection (default 1024)
	// MaxConnsPerUser bounds one user's connections (default 256; daemons
	// and superusers are not bound by it).
	MaxConnsPerUser int
	// MaxHandshakesPerSource bounds the connections from one address that
	// have not finished their handshake (default 64).
	MaxHandshakesPerSource int
	// RequestMemory bounds the bytes of requests arriving (frames larger
	// than wire.SmallFrame) that all connections together hold (default
	// 64 MiB, at least wire.MaxFrame).
	RequestMemory int
	IdleTimeout   time.Duration // close a connection silent this long (default 30m)
	// UserAllocLimit bounds the blocks (each replica counted) one user may
	// hold in uncommitted transactions, in bytes as the datanodes count them
	// (space.go): on sparse volumes a short block counts its pages; 0 means
	// 7/8 of the cluster's capacity.
	UserAllocLimit uint64

	// Relaxed makes every commit async: acknowledged once the store has
	// applied it, before it is durable (a client may also ask for async
	// per commit). The namenode bounds what a power cut can lose: it makes
	// everything applied durable at least every SyncInterval (default 1s)
	// and after every SyncCommits async commits (default 1000), and at
	// every durable commit or Sync. Blocks freed by a commit are reused
	// only once that commit is durable.
	Relaxed bool
	// NoMetrics: the namenode observes no latencies of its own (nothing
	// serves its metrics: it has no admin port). Its counters are kept.
	NoMetrics    bool
	SyncInterval time.Duration
	SyncCommits  int

	// LogPath, if set, is the commit log: the durability point of every
	// commit, with the store as a checkpoint the log is applied to in the
	// background (see internal/commitlog). Without it the store itself is
	// made durable at each sync.
	LogPath string
	// LogSize is the log's preallocated size and the amount of records
	// after which it is checkpointed and started over (default 64 MiB).
	LogSize int64
	// JournalSettle is how long the background sync of journaled small
	// writes' datanodes waits to gather more (journal.go; default 50 ms).
	JournalSettle time.Duration

	// Group, if set, makes this namenode the leader of a namenode group
	// (group.go): its batches go through the group's Raft log instead of
	// a commit log (LogPath is ignored), and a commit is durable once a
	// majority of the group has it. The namenode stops (Serve returns an
	// error matching ErrStoreFailed) when it loses the leadership; the
	// group, and the store, outlive it.
	Group *Group
	// Term is the group's term in which this namenode leads (from
	// Group.TakeOver; 0 for a single namenode). Every ticket carries it,
	// and registering datanodes are told it (term.go).
	Term uint64

	// Fatal, if set, is called when the metadata store fails (a failed
	// write or fsync leaves the store's state unknown). Either way the
	// namenode stops serving and must be restarted to reload the durable
	// state: Serve returns an error matching ErrStoreFailed, on which the
	// program should exit without closing the store.
	Fatal func(error)
}

type inode struct {
	attr    wire.Attr
	blocks  []wire.Extent     // files: committed block list
	entries map[string]uint64 // directories: committed entries
	sorted  []string          // directories: names of entries in order, rebuilt after changes (nil)
	parent  uint64            // directories: containing directory
	links   map[uint64]uint32 // other inodes: directories naming it → number of names
	subdirs int               // directories: committed entries that are directories
	users   int               // open transactions that touched this inode
	orphan  bool              // unlinked while in use; delete when users drops to 0
}

type run struct {
	node         uint32
	start, count uint64
	// Allocations only: the file and the file block index of start the
	// blocks were allocated for; they may be attached nowhere else. gen
	// is the allocation's generation.
	ino, index, gen uint64
	// reserved: the bytes the allocation holds on a sparse datanode
	// until its transaction ends (space.go).
	reserved uint64
	// Extensions in place only: attached by setblocks (the block's new
	// version is part of the transaction).
	attached bool
}

// Namenode is the metadata service. Create it with New and serve
// connections with Serve.
type Namenode struct {
	cfg Config
	log *slog.Logger

	mu         sync.Mutex
	ns         *namespace    // guarded by mu
	inos       inoCounter    // guarded by mu
	locks      *lockTable    // guarded by mu
	txns       *txnTable     // guarded by mu
	nodes      *nodeRegistry // guarded by mu
	epoch      uint64
	frees      freeQueue  // blocks freed, not yet reusable
	renameLock *Txn       // holder of the directory-move lock
	leases     *dirLeases // guarded by mu
	fsck       *checker   // guarded by mu

	repl *replicator // re-replication (replicator.go); guarded by mu

	gens generations // block generations (gen.go)

	cm       *committer
	deferred []*meta.Change // namenode-internal changes for the committer (mu)
	stop     chan struct{}
	wg       sync.WaitGroup

	// Store batches applied and known durable (guarded by mu; written
	// only by the committer).
	appliedSeq, durableSeq uint64

	// dataSync: datanodes holding data of async commits applied since the
	// last sync, which the next sync has sync first (mu; datasync.go).
	dataSync map[uint32]*conn
	// dataSyncBlocks: the blocks those commits wrote there; strikes: the
	// changes striking replicas whose sync failed, queued and not yet
	// written (mu; datasyncstrike.go).
	dataSyncBlocks []unsyncedBlock
	strikes        map[*meta.Change]bool
	// journal: journaled writes not yet synced on every replica (mu;
	// journal.go).
	journal journalState

	// The commit log and its checkpointer (nil without a log).
	ckpt *checkpointer

	commits atomic.Uint64
	syncs   atomic.Uint64 // fsyncs of the commit log (or store) that made commits durable

	srv *rpcServer
	// failure is set (to an error matching ErrStoreFailed) once the store
	// failed; Serve returns it.
	failure atomic.Pointer[error]
	obs     *observer // metrics.go
}

// ErrStoreFailed is what Serve returns after the metadata store failed.
var ErrStoreFailed = errors.New("the metadata store failed: the namenode stopped; restart it to reload the durable state")

// New loads the metadata from cfg.Store and starts the committer.
func New(cfg Config) (*Namenode, error) {
	if cfg.Blocksize == 0 {
		cfg.Blocksize = 1 << 20
	}
	if cfg.TxnTimeout == 0 {
		cfg.TxnTimeout = 10 * time.Minute
	}
	if cfg.HeartbeatTimeout == 0 {
		cfg.HeartbeatTimeout = 10 * time.Second
	}
	if cfg.DeadAfter == 0 {
		cfg.DeadAfter = 10 * time.Minute
	}
	if cfg.CopiesPerNode == 0 {
		cfg.CopiesPerNode = 2
	}
	if cfg.DefaultRep == 0 {
		cfg.DefaultRep = 1
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Security == 0 {
		cfg.Security = auth.None
	}
	if cfg.DataSecurity == 0 {
		cfg.DataSecurity = cfg.Security
	}
	if cfg.Security != auth.None && cfg.Credential == nil {
		return nil, fmt.Errorf("security level %s needs the namenode's credential", cfg.Security)
	}
	if cfg.TicketLifetime == 0 {
		cfg.TicketLifetime = time.Hour
	}
	if cfg.MaxConns == 0 {
		cfg.MaxConns = 4096
	}
	if cfg.MaxConnsPerUser == 0 {
		cfg.MaxConnsPerUser = 256
	}
	if cfg.RequestMemory == 0 {
		cfg.RequestMemory = 64 << 20
	}
	cfg.RequestMemory = max(cfg.RequestMemory, wire.MaxFrame)
	if cfg.MaxHandshakesPerSource == 0 {
		cfg.MaxHandshakesPerSource = 64
	}
	if cfg.MaxTxnsPerConn == 0 {
		cfg.MaxTxnsPerConn = 1024
	}
	if cfg.IdleTimeout == 0 {
		cfg.IdleTimeout = 30 * time.Minute
	}
	if cfg.SyncInterval == 0 {
		cfg.SyncInterval = time.Second
	}
	if cfg.LeaseTerm <= 0 {
		cfg.LeaseTerm = DefaultLeaseTerm
	}
	if cfg.SyncCommits == 0 {
		cfg.SyncCommits = 1000
	}
	if _, ok := cfg.Store.(meta.Syncer); !ok {
		return nil, errors.New("the metadata store cannot sync on demand (meta.Syncer)")
	}
	snap, firstGen, err := loadStarting(cfg) // Store.Load, and this boot's block generations (gen.go)
	if err != nil {
		return nil, err
	}
	var clog *commitlog.Log
	var journaled []meta.JournalWrite // the log's (journal.go)
	if cfg.LogPath != "" && cfg.Group == nil {
		if clog, snap, err = openLog(cfg, snap, func(ws []meta.JournalWrite) { journaled = append(journaled, ws...) }); err != nil {
			return nil, err
		}
	}
	n := &Namenode{
		cfg:    cfg,
		log:    cfg.Logger,
		locks:  newLockTable(),
		txns:   newTxnTable(),
		nodes:  newNodeRegistry(),
		leases: newDirLeases(time.Now(), cfg.LeaseTerm, cfg.Fresh),
		stop:   make(chan struct{}),
		repl:   newReplicator(cfg.DeadAfter, cfg.CopiesPerNode),
	}
	n.gens.raise(firstGen)
	n.ns = newNamespace(n.locks)
	if !cfg.NoMetrics {
		n.obs = newObserver()
	}
	n.srv = &rpcServer{obs: n.obs, h: n, security: cfg.Security, credential: cfg.Credential, idleTimeout: cfg.IdleTimeout,
		log: n.log, stop: n.stop, conns: map[*conn]struct{}{},
		limits: connlimit.New(cfg.MaxConns, cfg.MaxConnsPerUser),
		listen: connlimit.Options{Name: "namenode", Log: n.log, PendingPerSource: cfg.MaxHandshakesPerSource,
			MaxOpen: cfg.MaxConns + reserveConns + connlimit.DefaultMaxPending},
		frames: connlimit.NewBudget(cfg.RequestMemory, requestMemoryWait)}
	n.cm = newCommitter(nnStore{n}, cfg.SyncInterval, cfg.SyncCommits)
	n.fsck = &checker{mu: &n.mu, ns: n.ns, nodes: n.nodes, txns: n.txns, inoNext: &n.inos.next,
		blocksize: int64(cfg.Blocksize), timeout: cfg.TxnTimeout, log: n.log}
	for i := range snap.Inodes {
		a := &snap.Inodes[i]
		in := &inode{attr: wireAttr(a)}
		if a.Type == meta.TypeDir {
			in.entries = map[string]uint64{}
		}
		in.blocks = wireExtents(snap.Blocks[a.Ino])
		n.ns.inodes[a.Ino] = in
	}
	if n.ns.inodes[rootIno] == nil {
		return nil, errors.New("metadata has no root directory")
	}
	for _, e := range snap.Entries {
		p := n.ns.inodes[e.Parent]
		if p == nil || p.entries == nil {
			n.log.Warn("entry in a missing or non-directory parent ignored", "parent", e.Parent, "name", e.Name)
			continue
		}
		p.entries[e.Name] = e.Ino
		if c := n.ns.inodes[e.Ino]; c != nil {
			c.linkFrom(e.Parent, 1)
			if c.attr.Type == wire.TypeDir {
				p.subdirs++
			}
		}
	}
	for _, in := range n.ns.inodes {
		in.dirNlink()
	}
	n.ns.inodes[rootIno].parent = rootIno
	for _, d := range snap.Datanodes {
		n.nodes.add(d)
	}
	n.loadNodeService(snap)
	// Inodes unlinked while open when the namenode stopped are deleted now:
	// no transaction survives a restart.
	var orphans []uint64
	for ino, in := range n.ns.inodes {
		if in.attr.Nlink == 0 && ino != rootIno {
			orphans = append(orphans, ino)
			continue
		}
		for _, x := range in.blocks {
			// A group member taking over may draw the same boot epoch as
			// the leader before it (each raises its own store's): its
			// generations, and so its read tickets, start above every
			// committed allocation's all the same.
			n.gens.raise(x.Gen)
			for _, r := range x.Replicas {
				if dn := n.nodes.get(r.Node); dn != nil && r.Start+uint64(x.Count) <= dn.Blocks {
					dn.used.set(r.Start, uint64(x.Count))
				}
			}
		}
	}
	if len(orphans) > 0 {
		for _, ino := range orphans {
			delete(n.ns.inodes, ino)
		}
	}
	if len(orphans) > 0 && cfg.Group != nil {
		// Through the group's log like every change of its stores.
		n.deferred = append(n.deferred, &meta.Change{DelInodes: orphans})
	} else if len(orphans) > 0 {
		if err := cfg.Store.Apply(context.Background(), []*meta.Change{{DelInodes: orphans}}); err != nil {
			return nil, fmt.Errorf("delete %d orphaned inodes: %w", len(orphans), err)
		}
	}
	n.inos = inoCounter{next: snap.InoLimit, limit: snap.InoLimit}
	if clog != nil {
		n.ckpt = newCheckpointer(clog, cfg.LogSize, cfg.Store, snap.LogSeq, n.fatal, n.log)
		n.ckpt.carry = n.journalCarry
		n.loadJournal(journaled)
	}
	n.wg.Add(3)
	go func() {
		defer n.wg.Done()
		n.cm.run(n.stop)
	}()
	go n.reaper()
	go n.replicatorLoop()
	return n, nil
}

const rootIno = 1

// requestMemoryWait is how long a request arriving waits for
// Config.RequestMemory before its connection is closed.
const requestMemoryWait = 10 * time.Second

// reserveConns is how far daemons and superusers may go past MaxConns
// (the file descriptor limit permitting).
const reserveConns = 64

// linkFrom records d more (or fewer) names of the inode in directory
// parent: a directory's parent, the directories holding a file's names.
// dirNlink sets a directory's link count from its subdirectories (each
// names it with ".."), as POSIX has it: 2 + subdirectories. It is derived
// state, kept in memory from the committed entries (a mkdir takes only a
// shared lock on its parent, so the parent's stored attributes do not
// follow); a removed directory keeps 0.
func (in *inode) dirNlink() {
	if in.attr.Type == wire.TypeDir && in.attr.Nlink != 0 {
		in.attr.Nlink = uint32(2 + in.subdirs)
	}
}

func (in *inode) linkFrom(parent uint64, d int) {
	if in.attr.Type == wire.TypeDir {
		if d > 0 {
			in.parent = parent
		}
		return
	}
	if in.links == nil {
		in.links = map[uint64]uint32{}
	}
	if v := int(in.links[parent]) + d; v > 0 {
		in.links[parent] = uint32(v)
	} else {
		delete(in.links, parent)
	}
}

// fatal stops the namenode after a store failure: nothing more is
// acknowledged, every connection is closed (clients see the outcome of
// their pending commits as unknown), and a restart reloads what is durable.
func (n *Namenode) fatal(err error) {
	n.cm.halt()
	if n.cfg.Group != nil {
		// Its member goes on in the group, answering "not the leader".
		n.log.Warn("the namenode stops serving as its group's leader", "err", err)
	} else {
		n.log.Error("metadata store failed: the namenode stops; restart it to reload the durable state", "err", err)
	}
	failure := fmt.Errorf("%w: %w", ErrStoreFailed, err)
	n.failure.CompareAndSwap(nil, &failure)
	n.srv.closeAll()
	if n.cfg.Fatal != nil {
		n.cfg.Fatal(err)
	}
}

// failed returns the store failure that stopped the namenode (nil: none).
func (n *Namenode) failed() error {
	if f := n.failure.Load(); f != nil {
		return *f
	}
	return nil
}

// Close stops listeners, closes connections (aborting their transactions)
// and stops background work. It does not close the store.
func (n *Namenode) Close() error {
	n.srv.closeAll()
	close(n.stop)
	n.wg.Wait()
	// The checkpointer applies what is logged, then stops; the log itself
	// would replay it anyway.
	if n.ckpt != nil {
		n.ckpt.close()
	}
	return nil
}

// reaper aborts idle transactions and marks silent datanodes dead.
func (n *Namenode) reaper() {
	defer n.wg.Done()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-n.stop:
			return
		case now := <-t.C:
			n.mu.Lock()
			for _, tx := range n.txns.all() {
				if !tx.committing && now.Sub(tx.lastUse) > n.cfg.TxnTimeout {
					n.log.Info("aborting idle transaction", "txn", tx.key.id)
					n.endTxn(tx, false)
				}
			}
			for dn := range n.nodes.all() {
				if dn.alive && now.Sub(dn.lastSeen) > n.cfg.HeartbeatTimeout {
					n.log.Warn("datanode missed heartbeats, marking dead", "node", dn.Identity)
					dn.alive = false
				}
			}
			n.mu.Unlock()
		}
	}
}
