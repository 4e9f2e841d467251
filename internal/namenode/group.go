package namenode

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/plasmafs/plasma/internal/auth"
	"github.com/plasmafs/plasma/internal/meta"
	"github.com/plasmafs/plasma/internal/wire"
)

// A namenode group replicates the commit records the committer writes
// through a Raft log (hashicorp/raft; docs/design.md, "Replicated
// namenodes"). Every member applies the committed entries, in order, to its
// own checkpoint store through a checkpointer without a commit log (the Raft
// log is the durability point); the leader alone has the namespace in
// memory and serves. A member that becomes leader loads its store once it
// holds every committed entry; one that stops being leader drops its memory
// (it may hold batches the group never committed) and goes back to
// answering "not the leader".

// Peer is one member of a namenode group.
type Peer struct {
	ID   string // unique in the group
	Addr string // client address, host:port; Raft listens on the next port (RaftAddr)
}

// ParsePeers parses "id=host:port,id=host:port,...".
func ParsePeers(s string) ([]Peer, error) {
	var out []Peer
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		id, addr, ok := strings.Cut(f, "=")
		if !ok || id == "" || addr == "" {
			return nil, fmt.Errorf("peer %q: want id=host:port", f)
		}
		if _, err := RaftAddr(addr); err != nil {
			return nil, fmt.Errorf("peer %s: %w", id, err)
		}
		for _, p := range out {
			if p.ID == id {
				return nil, fmt.Errorf("peer id %s given twice", id)
			}
			if p.Addr == addr {
				return nil, fmt.Errorf("address %s given for peers %s and %s", addr, p.ID, id)
			}
		}
		out = append(out, Peer{ID: id, Addr: addr})
	}
	if len(out) == 0 {
		return nil, errors.New("no peers")
	}
	return out, nil
}

// RaftAddr is the address a member with client address addr serves the
// group's Raft traffic on: the next port.
func RaftAddr(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", err
	}
	p, err := strconv.Atoi(port)
	if err != nil || p <= 0 || p >= 65535 {
		return "", fmt.Errorf("address %s: the port must be a number below 65535 (Raft uses the next one)", addr)
	}
	return net.JoinHostPort(host, strconv.Itoa(p+1)), nil
}

// GroupConfig configures a member of a namenode group.
type GroupConfig struct {
	Self  string // this member's id
	Peers []Peer // every member, this one included
	// Dir holds the member's Raft state: the log and stable state
	// (raft.db), snapshots and the group file, which records the group.
	Dir string
	// Store is this member's checkpoint store; every member's starts as a
	// copy of the same database (the same namespace, the same state).
	Store meta.Store
	// ElectionTimeout is how long followers wait for the leader before
	// an election (default 2 s); the leader steps down after as long
	// without hearing from a majority.
	ElectionTimeout time.Duration
	// RaftDial, by peer id, is where this member reaches a peer's Raft
	// port when not at RaftAddr of its address (ParseRaftDial).
	RaftDial map[string]string
	Logger   *slog.Logger
	// Fatal is called when the store fails while applying committed
	// entries: the member must stop (a restart reloads what is durable).
	Fatal func(error)
	// KeepEntries is how many log entries a member keeps behind its
	// snapshot (a member that missed more gets a copy of the leader's
	// store); it snapshots every quarter as many entries, checking every
	// SnapshotInterval. Defaults 65,536 and 2 minutes.
	KeepEntries      uint64
	SnapshotInterval time.Duration
	// Join is the id of a running group this member joins as a new
	// member (Peers then lists only this member): it waits until the
	// leader adds it ('plasma admin namenode add') and seeds its store
	// with a copy of the leader's (groupsnap.go).
	Join string
	// Security and Credential are how this member asks others (its
	// peers at formation, a member being added) about their group.
	Security   auth.Level
	Credential *auth.Credential
}

// groupFile is what a member records of its group at its first start;
// a later start with other peers, another id or another database is
// refused.
type groupFile struct {
	Group     string `json:"group"`
	Self      string `json:"self"`
	Peers     []Peer `json:"peers"`
	Namespace string `json:"namespace"`
	// Base is the store's commit-log position when the group was formed:
	// the store records Raft entry i as log position Base+i.
	Base uint64 `json:"base"`
	// Members are the group's members as this member last applied a
	// change of them ('plasma admin namenode add/remove'); none: Peers.
	Members []Peer `json:"members,omitempty"`
	// Joined: this member joined a running group as a new member
	// (Peers lists only itself); AwaitingSeed: its store has not been
	// seeded with a copy of the leader's yet (Namespace and Base are
	// unknown until then).
	Joined       bool `json:"joined,omitempty"`
	AwaitingSeed bool `json:"awaiting_seed,omitempty"`
	// Removed: a change of members removed this member; it must not
	// start again with this state.
	Removed bool `json:"removed,omitempty"`
}

// Group is this process's membership in a namenode group.
type Group struct {
	cfg   GroupConfig
	fmu   sync.Mutex // guards file, changed by the FSM (members, seeding)
	file  groupFile
	raft  *raft.Raft
	state *raftStore // term and vote (raft.db)
	logs  *raftLog   // the log (raft.log)
	trans *raft.NetworkTransport
	ckpt  *checkpointer

	leading chan bool // leadership changes (raft's NotifyCh)

	pmu  sync.Mutex
	last raft.ApplyFuture // the last batch proposed (pmu)
	// own holds the batches this member proposed as leader until they
	// are applied, by the first byte of their encoding: the entry Raft
	// applies on the leader carries the very slice proposed, so the
	// leader's store gets the changes without decoding them again (an
	// entry read back from the log is another slice and is decoded).
	own map[*byte][]*meta.Change // pmu
}

// groupID names a group: its namespace, its members and the database
// position it started from, hashed.
func groupID(namespace string, peers []Peer, base uint64) string {
	ps := slices.Clone(peers)
	slices.SortFunc(ps, func(a, b Peer) int { return strings.Compare(a.ID, b.ID) })
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%d\n", namespace, base)
	for _, p := range ps {
		fmt.Fprintf(h, "%s=%s\n", p.ID, p.Addr)
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// samePeers tells whether a and b list the same members.
func samePeers(a, b []Peer) bool {
	key := func(ps []Peer) []string {
		var out []string
		for _, p := range ps {
			out = append(out, p.ID+"="+p.Addr)
		}
		slices.Sort(out)
		return out
	}
	return slices.Equal(key(a), key(b))
}

func formatPeers(ps []Peer) string {
	var out []string
	for _, p := range ps {
		out = append(out, p.ID+"="+p.Addr)
	}
	return strings.Join(out, ",")
}

// OpenGroup starts this member: it checks (or, at the first start,
// records) the group, opens the Raft log and joins the group. The store
// must not be used by anything else until the member becomes leader.
func OpenGroup(cfg GroupConfig) (*Group, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.ElectionTimeout == 0 {
		cfg.ElectionTimeout = 2 * time.Second
	}
	self := slices.IndexFunc(cfg.Peers, func(p Peer) bool { return p.ID == cfg.Self })
	if self < 0 || cfg.Join != "" && len(cfg.Peers) != 1 {
		return nil, fmt.Errorf("-id %s is not among the peers (%s)", cfg.Self, formatPeers(cfg.Peers))
	}
	ns := ""
	if n, ok := cfg.Store.(meta.Namespacer); ok {
		ns = n.Namespace()
	}
	snap, err := cfg.Store.Load(context.Background())
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("namenode group state: %w", err)
	}
	if err := checkNoRunningGroup(cfg, ns, snap.LogSeq); err != nil {
		return nil, err
	}
	gf, err := checkGroupFile(cfg, ns, snap.LogSeq)
	if err != nil {
		return nil, err
	}
	removeSeedLeftovers(cfg.Dir)
	g := &Group{cfg: cfg, file: gf, leading: make(chan bool, 16), own: map[*byte][]*meta.Change{}}
	fatal := func(err error) {
		cfg.Logger.Error("checkpoint store failed while applying the group's log: this member stops; restart it to reload the durable state", "err", err)
		if cfg.Fatal != nil {
			cfg.Fatal(err)
		}
	}
	g.ckpt = newCheckpointer(nil, 0, cfg.Store, snap.LogSeq, fatal, cfg.Logger)
	if g.state, err = openRaftStore(filepath.Join(cfg.Dir, "raft.db")); err != nil {
		g.ckpt.stop()
		return nil, err
	}
	if g.logs, err = openRaftLogs(cfg.Dir, g.state); err != nil {
		g.ckpt.stop()
		g.state.Close()
		if errors.Is(err, errRaftLogLost) {
			return nil, fmt.Errorf("%w: %s", err, lostStateAdvice(cfg.Dir, gf.Group, gf.Self))
		}
		return nil, err
	}
	if err := g.start(); err != nil {
		g.ckpt.stop()
		g.logs.Close()
		g.state.Close()
		return nil, err
	}
	return g, nil
}

// checkGroupFile compares the recorded group with this start's, or
// records it at the first start.
func checkGroupFile(cfg GroupConfig, namespace string, logSeq uint64) (groupFile, error) {
	path := filepath.Join(cfg.Dir, "group")
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		if _, err := os.Stat(filepath.Join(cfg.Dir, "raft.db")); err == nil {
			return groupFile{}, fmt.Errorf("%s holds a Raft log but no group file: move the directory away (the member then joins afresh from its database)", cfg.Dir)
		}
		gf := groupFile{Self: cfg.Self, Peers: cfg.Peers, Namespace: namespace, Base: logSeq}
		gf.Group = groupID(namespace, cfg.Peers, logSeq)
		if cfg.Join != "" {
			gf = groupFile{Group: cfg.Join, Self: cfg.Self, Peers: cfg.Peers, Joined: true, AwaitingSeed: true}
		}
		if err := writeGroupFile(cfg.Dir, gf); err != nil {
			return groupFile{}, err
		}
		return gf, nil
	}
	if err != nil {
		return groupFile{}, fmt.Errorf("namenode group: %w", err)
	}
	var gf groupFile
	if err := json.Unmarshal(b, &gf); err != nil {
		return groupFile{}, fmt.Errorf("namenode group file %s: %w", path, err)
	}
	if _, err := os.Stat(filepath.Join(cfg.Dir, "raft.db")); errors.Is(err, os.ErrNotExist) {
		// Its votes and log are gone: started afresh it could vote twice
		// in a term, or help elect a leader lacking commits it had.
		return groupFile{}, fmt.Errorf("%s: this member's Raft log (raft.db) is gone: %s", cfg.Dir, lostStateAdvice(cfg.Dir, gf.Group, gf.Self))
	}
	members := gf.Members
	if members == nil {
		members = gf.Peers
	}
	switch {
	case gf.Self != cfg.Self:
		return gf, fmt.Errorf("%s: this member joined group %s as %s, not as -id %s; start it with its own id", path, gf.Group, gf.Self, cfg.Self)
	case gf.Removed:
		return gf, fmt.Errorf("%s: this member was removed from group %s ('plasma admin namenode remove'); to bring it back as a new member, move %s away, start it with -join %s -id %s, then 'plasma admin namenode add %s ADDR'",
			path, gf.Group, cfg.Dir, gf.Group, cfg.Self, cfg.Self)
	case cfg.Join != "" && cfg.Join != gf.Group:
		return gf, fmt.Errorf("%s: this member belongs to group %s, not -join %s", path, gf.Group, cfg.Join)
	case cfg.Join == "" && !samePeers(gf.Peers, cfg.Peers) && !samePeers(members, cfg.Peers):
		return gf, fmt.Errorf("%s: group %s has the peers %s, not -peers %s; start every member with the same list (the list the group was formed with, or its members now)",
			path, gf.Group, formatPeers(members), formatPeers(cfg.Peers))
	case cfg.Join == "" && gf.Joined && !samePeers(members, cfg.Peers):
		return gf, fmt.Errorf("%s: this member joined group %s as a new member: start it with -join %s (or -peers %s)", path, gf.Group, gf.Group, formatPeers(members))
	case !gf.AwaitingSeed && gf.Namespace != namespace:
		return gf, fmt.Errorf("%s: group %s replicates namespace %s, but the database holds namespace %s; give each member a copy of the group's database",
			path, gf.Group, gf.Namespace, namespace)
	}
	return gf, nil
}

// lostStateAdvice says how a member that lost its Raft state comes back.
func lostStateAdvice(dir, group, self string) string {
	return fmt.Sprintf("it must not vote with what it lost. It comes back as a new member: remove it from the group ('plasma admin namenode remove %s'), move %s away, "+
		"start it with -join %s -id %s (no -peers), then add it ('plasma admin namenode add %s ADDR'): the leader seeds it with a copy of its store",
		self, dir, group, self, self)
}

// writeGroupFile records gf in dir, durably.
func writeGroupFile(dir string, gf groupFile) error {
	data, _ := json.MarshalIndent(gf, "", "  ")
	if err := writeFileSynced(filepath.Join(dir, "group"), append(data, '\n')); err != nil {
		return fmt.Errorf("record the namenode group: %w", err)
	}
	return nil
}

// writeFileSynced writes path through a temporary file, fsync and
// rename, and syncs the directory.
func writeFileSynced(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

func (g *Group) start() error {
	self, _ := g.peer(g.cfg.Self)
	raddr, _ := RaftAddr(self.Addr)
	ln, err := net.Listen("tcp", raddr)
	if err != nil {
		return fmt.Errorf("namenode group: listen for Raft on %s (the port after the client port): %w", raddr, err)
	}
	via, err := g.raftVia()
	if err != nil {
		ln.Close()
		return err
	}
	hl := hclog.New(&hclog.LoggerOptions{Name: "raft", Level: hclog.Warn, Output: os.Stderr})
	g.trans = raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: &groupStream{ln: ln, group: g.file.Group, log: g.cfg.Logger, via: via}, MaxPool: 4, Timeout: 10 * time.Second, Logger: hl})
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(g.cfg.Self)
	rc.HeartbeatTimeout = g.cfg.ElectionTimeout
	rc.ElectionTimeout = g.cfg.ElectionTimeout
	// The leader steps down after this long without hearing from a
	// majority. As long as the election timeout: a loaded machine's stalls
	// (fsyncs, CPU) should not depose a healthy leader, and a partitioned
	// one commits nothing meanwhile anyway (commits need a majority).
	rc.LeaderLeaseTimeout = g.cfg.ElectionTimeout
	rc.CommitTimeout = 5 * time.Millisecond
	rc.BatchApplyCh = true
	rc.MaxAppendEntries = 256
	// Entries are batches; a member that missed fewer than this many
	// catches up from the log, one further behind (or new) gets a copy
	// of the leader's store (groupsnap.go).
	rc.TrailingLogs = trailingLogs
	if g.cfg.KeepEntries > 0 {
		rc.TrailingLogs = g.cfg.KeepEntries
	}
	rc.SnapshotThreshold = max(rc.TrailingLogs/4, 1)
	if g.cfg.SnapshotInterval > 0 {
		rc.SnapshotInterval = g.cfg.SnapshotInterval
	}
	rc.NotifyCh = g.leading
	rc.Logger = hl
	// A member removed from the group stays up, answering that it was
	// removed ('plasma admin namenodes'), until its operator stops it.
	rc.ShutdownOnRemove = false
	// The store is the member's state: a snapshot of the member's own is
	// only the position its store holds, and at start-up the store holds
	// at least that much (a copy received and not yet applied is applied
	// by seedAtStart).
	rc.NoSnapshotRestoreOnStart = true
	files, err := raft.NewFileSnapshotStoreWithLogger(g.cfg.Dir, 2, hl)
	if err != nil {
		g.trans.Close()
		return fmt.Errorf("namenode group: snapshots in %s: %w", g.cfg.Dir, err)
	}
	snaps := &groupSnapshots{FileSnapshotStore: files, g: g}
	if err := g.seedAtStart(snaps); err != nil {
		g.trans.Close()
		return err
	}
	// The leader reads recent entries to send them to the followers:
	// from memory.
	logs, err := raft.NewLogCache(1024, g.logs)
	if err != nil {
		g.trans.Close()
		return fmt.Errorf("namenode group: %w", err)
	}
	has, err := raft.HasExistingState(logs, g.state, snaps)
	if err != nil {
		g.trans.Close()
		return fmt.Errorf("namenode group: %w", err)
	}
	if !has && !g.file.Joined {
		// Every member bootstraps with the same configuration, which
		// the library allows: the first leader's log settles it. (A
		// member joining a running group starts with none: the leader
		// sends it a copy of its store and its log.)
		if err := g.bootstrap(snaps); err != nil {
			g.trans.Close()
			return fmt.Errorf("namenode group: bootstrap: %w", err)
		}
	}
	r, err := raft.NewRaft(rc, groupFSM{g}, logs, g.state, snaps, g.trans)
	if err != nil {
		g.trans.Close()
		return fmt.Errorf("namenode group: %w", err)
	}
	g.raft = r
	if g.file.Joined && g.file.AwaitingSeed {
		g.cfg.Logger.Info("waiting to be added to namenode group ('plasma admin namenode add')", "group", g.file.Group, "id", g.cfg.Self, "addr", self.Addr)
		return nil
	}
	g.cfg.Logger.Info("joined namenode group", "group", g.file.Group, "id", g.cfg.Self, "members", formatPeers(g.members()))
	return nil
}

func (g *Group) peer(id string) (Peer, bool) {
	for _, p := range g.cfg.Peers {
		if p.ID == id {
			return p, true
		}
	}
	return Peer{}, false
}

// clientAddr is the client address of a member whose Raft address is
// raftAddr (the port before it).
func clientAddr(raftAddr string) string {
	host, port, err := net.SplitHostPort(raftAddr)
	if err != nil {
		return ""
	}
	p, err := strconv.Atoi(port)
	if err != nil || p <= 1 {
		return ""
	}
	return net.JoinHostPort(host, strconv.Itoa(p-1))
}

// ID is the group's id.
func (g *Group) ID() string { return g.file.Group }

// Leading delivers true when this member becomes leader and false when it
// stops being leader.
func (g *Group) Leading() <-chan bool { return g.leading }

// IsLeader tells whether this member leads the group now.
func (g *Group) IsLeader() bool { return g.raft.State() == raft.Leader }

// LeaderAddr is the client address of the group's leader as this member
// knows it ("" if none).
func (g *Group) LeaderAddr() string {
	addr, _ := g.raft.LeaderWithID()
	if addr == "" {
		return ""
	}
	return clientAddr(string(addr))
}

// Ready returns once this member, the leader, has applied every entry
// the group committed to its store: its state is then the group's.
func (g *Group) Ready() error {
	// Batches proposed in an earlier term and never committed.
	g.pmu.Lock()
	clear(g.own)
	g.pmu.Unlock()
	if err := g.raft.Barrier(0).Error(); err != nil {
		return fmt.Errorf("namenode group: catch up before leading: %w", err)
	}
	return g.ckpt.waitAll()
}

// append proposes a batch; Sync reports whether it was committed.
// Called by the committer's writing goroutine only.
func (g *Group) append(changes []*meta.Change) {
	data := meta.EncodeChanges(changes)
	if len(data) > 0 {
		g.pmu.Lock()
		g.own[&data[0]] = changes
		g.pmu.Unlock()
	}
	f := g.raft.Apply(data, 0)
	g.pmu.Lock()
	g.last = f
	g.pmu.Unlock()
}

// errNoMajority is how a commit the group could not commit fails.
var errNoMajority = errors.New("the namenode group did not commit the batch: this namenode lost its leadership (a majority of the group unreachable, or another member elected)")

// sync returns once every batch proposed before it was called is durable
// on a majority of the group (and queued for this member's store).
func (g *Group) sync() error {
	g.pmu.Lock()
	f := g.last
	g.pmu.Unlock()
	if f == nil {
		return nil
	}
	if err := f.Error(); err != nil {
		return fmt.Errorf("%w: %w", errNoMajority, err)
	}
	return nil
}

// Status is a member's view of itself, for 'plasma admin namenodes'.
func (g *Group) status() *wire.Response {
	st := g.raft.Stats()
	num := func(k string) uint64 {
		v, _ := strconv.ParseUint(st[k], 10, 64)
		return v
	}
	role := strings.ToLower(g.raft.State().String())
	conf := g.configuration()
	if i := slices.IndexFunc(conf.Servers, func(s raft.Server) bool { return string(s.ID) == g.cfg.Self }); i < 0 {
		// Not (or no longer) in the group's configuration.
		role = "removed"
		if len(conf.Servers) == 0 || g.file.Joined && g.awaitingSeed() {
			role = "joining"
		}
	} else if conf.Servers[i].Suffrage != raft.Voter && role == "follower" {
		role = "nonvoter" // catching up; 'admin namenode add' makes it a voter
	}
	g.fmu.Lock()
	if g.file.Removed {
		role = "removed" // told by the leader (groupmembers.go)
	}
	g.fmu.Unlock()
	// Paths[4:]: the members as this member knows them, id=addr.
	paths := []string{g.cfg.Self, role, g.LeaderAddr(), g.file.Group}
	for _, p := range peersOf(conf) {
		paths = append(paths, p.ID+"="+p.Addr)
	}
	return &wire.Response{Paths: paths,
		Counters: []uint64{num("term"), num("applied_index"), num("last_log_index"), num("commit_index")}}
}

// Members is the number of voting members of the group.
func (g *Group) Members() int {
	n := 0
	for _, s := range g.configuration().Servers {
		if s.Suffrage == raft.Voter {
			n++
		}
	}
	return n
}

// WaitStore waits until the store holds every entry applied so far.
func (g *Group) WaitStore() error { return g.ckpt.waitAll() }

// Close leaves the group (the others go on without this member) and stops
// applying to the store.
func (g *Group) Close() error {
	err := g.raft.Shutdown().Error()
	g.trans.Close()
	g.ckpt.stop()
	if cerr := g.logs.Close(); err == nil {
		err = cerr
	}
	if cerr := g.state.Close(); err == nil {
		err = cerr
	}
	return err
}

// groupFSM applies committed entries to the member's store, through its
// checkpointer. The leader's memory has them already (the committer
// applied them when it proposed them); a follower has no namespace in
// memory until it becomes leader and loads its store.
type groupFSM struct{ g *Group }

func (f groupFSM) Apply(l *raft.Log) any {
	if l.Type != raft.LogCommand {
		return nil
	}
	if f.g.awaitingSeed() {
		// A new member gets a copy of the leader's store before any
		// entry; entries from the group's formation on would be applied
		// to a store that lacks the formation's state.
		err := fmt.Errorf("raft log entry %d arrived before a copy of the leader's store: the group's log still holds its formation "+
			"(a group formed by an earlier version): seed this member from a backup of a current member's database instead", l.Index)
		f.g.ckpt.fatal(err)
		return err
	}
	c := f.g.ckpt
	seq := f.g.base() + l.Index
	c.mu.Lock()
	held := seq <= c.last
	c.mu.Unlock()
	if held {
		return nil // the store had it at start-up
	}
	var changes []*meta.Change
	own := false
	if len(l.Data) > 0 {
		f.g.pmu.Lock()
		changes, own = f.g.own[&l.Data[0]]
		delete(f.g.own, &l.Data[0])
		f.g.pmu.Unlock()
	}
	if own {
		c.queue(seq, changes)
		return nil
	}
	changes, err := meta.DecodeChanges(l.Data)
	if err != nil {
		err = fmt.Errorf("raft log entry %d: %w", l.Index, err)
		c.fatal(err)
		return err
	}
	c.queue(seq, changes)
	return nil
}

// groupStream is the Raft transport's connections, each opened with the
// group's id, so that members of different groups (a mistyped peer list,
// another namespace) never talk: the receiving side drops a connection
// with another id and logs it.
type groupStream struct {
	ln    net.Listener
	group string
	log   *slog.Logger
	via   map[string]string // Raft address -> address dialed (GroupConfig.RaftDial)
}

const groupMagic = "plasma-raft "

func (s *groupStream) Accept() (net.Conn, error) {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return nil, err
		}
		hdr := make([]byte, len(groupMagic)+len(s.group))
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.ReadFull(c, hdr); err != nil || string(hdr) != groupMagic+s.group {
			s.log.Error("namenode group: refused a Raft connection of another group (check every member's -peers and database)",
				"remote", c.RemoteAddr(), "got", strings.TrimSpace(string(hdr)), "want", groupMagic+s.group)
			c.Close()
			continue
		}
		c.SetReadDeadline(time.Time{})
		return c, nil
	}
}

func (s *groupStream) Close() error   { return s.ln.Close() }
func (s *groupStream) Addr() net.Addr { return s.ln.Addr() }

func (s *groupStream) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	c, err := net.DialTimeout("tcp", s.dialAddr(string(addr)), timeout)
	if err != nil {
		return nil, err
	}
	c.SetWriteDeadline(time.Now().Add(timeout))
	if _, err := c.Write([]byte(groupMagic + s.group)); err != nil {
		c.Close()
		return nil, err
	}
	c.SetWriteDeadline(time.Time{})
	return c, nil
}

// opNamenodes tells this namenode's place in its group (Paths: id, role,
// leader's address, group id, then the members id=addr; Counters: term,
// applied, last and commit index); a namenode without a group is
// "single". With Path "add" or "remove" it changes the group's members
// (groupmembers.go).
func (n *Namenode) opNamenodes(c *conn, _ *Txn, _ *auth.Identity, q *wire.Request) (*wire.Response, error) {
	if q.Path != "" {
		return n.opMembers(c, q) // groupmembers.go
	}
	if n.cfg.Group == nil {
		return &wire.Response{Paths: []string{"", "single", "", ""}, Counters: []uint64{0, n.appliedSeq, n.appliedSeq, n.appliedSeq}}, nil
	}
	return n.cfg.Group.status(), nil
}

// errLeadershipLost stops a leader's namenode whose member is no longer
// the leader.
var errLeadershipLost = errors.New("this namenode is no longer the leader of its group: its memory may hold batches the group never committed, so it stops serving")

// LostLeadership stops the namenode (Serve returns an error matching
// ErrStoreFailed): its member stopped leading the group. Connections are
// closed, so pending commits are reported to their clients as of unknown
// outcome.
func (n *Namenode) LostLeadership() { n.fatal(errLeadershipLost) }
