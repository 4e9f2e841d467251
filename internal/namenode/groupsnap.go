package namenode

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/hashicorp/raft"

	"github.com/plasmafs/plasma/internal/meta"
)

// A group member's state is its checkpoint store, so its Raft snapshots
// are of two kinds:
//
//   - its own (the FSM's Snapshot): only the log position the store holds
//     durably, 8 bytes, after which Raft may compact the log;
//   - a seed: a copy of the leader's store, for a member too far behind
//     for the leader's log, or new. The leader makes it when Raft opens
//     its own snapshot to send it (groupSnapshots.Open: a consistent copy
//     of the store, which holds at least the snapshot's position), and
//     the member keeps what it received in its snapshot directory and
//     replaces its store's content with it (Restore, or seedAtStart after
//     a crash in between).
//
// A seed is seedMagic, one line of JSON (seedHeader), then a SQLite
// database file (meta.Seeder's copy).

// trailingLogs is how many entries a member keeps behind its snapshot: a
// member that missed fewer catches up from the log.
const trailingLogs = 1 << 16

const seedMagic = "plasma-namenode-seed 1\n"

// seedHeader says what a seed holds.
type seedHeader struct {
	Group     string `json:"group"`
	Namespace string `json:"namespace"`
	Base      uint64 `json:"base"` // the group's Base (groupFile)
	Seq       uint64 `json:"seq"`  // the store's log position: Base + the last entry it holds
}

// positionSize is the size of a member's own snapshot.
const positionSize = 8

// groupSnapshots is the member's snapshot store: raft's file store, whose
// Open turns the member's own snapshot into a seed. The seed of the newest
// snapshot is kept (one file) while it is the newest: the library opens
// the snapshot again at every retry to a member that cannot take it yet
// (down, or failing), and a copy of the store each time would cost the
// leader a whole database's reads and writes every few seconds.
type groupSnapshots struct {
	*raft.FileSnapshotStore
	g *Group

	mu       sync.Mutex
	seedID   string // the snapshot whose seed is kept
	seedPath string // its copy of the store
	seedHdr  []byte // its header
}

// Open returns snapshot id to send it to a follower (or to restore a
// seed received): a seed as is; for the member's own snapshot, a fresh
// copy of the store.
func (s *groupSnapshots) Open(id string) (*raft.SnapshotMeta, io.ReadCloser, error) {
	m, rc, err := s.FileSnapshotStore.Open(id)
	if err != nil || m.Size != positionSize {
		return m, rc, err
	}
	var b [positionSize]byte
	_, err = io.ReadFull(rc, b[:])
	rc.Close()
	if err != nil {
		return nil, nil, fmt.Errorf("namenode group snapshot %s: %w", id, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seedID != m.ID {
		path, hdr, err := s.g.makeSeed(m, binary.BigEndian.Uint64(b[:]))
		if err != nil {
			return nil, nil, err
		}
		if s.seedPath != "" {
			os.Remove(s.seedPath)
		}
		s.seedID, s.seedPath, s.seedHdr = m.ID, path, hdr
	}
	f, err := os.Open(s.seedPath)
	if err != nil {
		return nil, nil, fmt.Errorf("namenode group: seed: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("namenode group: seed: %w", err)
	}
	out := *m
	out.Size = int64(len(s.seedHdr)) + fi.Size()
	s.g.cfg.Logger.Info("namenode group: sending a copy of the store to a member too far behind for the log", "entry", m.Index, "bytes", out.Size)
	return &out, &seedFile{Reader: io.MultiReader(bytes.NewReader(s.seedHdr), f), f: f}, nil
}

// seedFile is the stream of a seed: its header, then the copy of the
// store, unlinked already (closing it frees it).
type seedFile struct {
	io.Reader
	f *os.File
}

func (s *seedFile) Close() error { return s.f.Close() }

// makeSeed copies the store (holding at least log position seq, the
// snapshot m's) into a file of dir, and returns it with its header.
func (g *Group) makeSeed(m *raft.SnapshotMeta, seq uint64) (path string, header []byte, err error) {
	st, ok := g.cfg.Store.(meta.Seeder)
	if !ok {
		return "", nil, errors.New("this member's metadata store cannot copy itself to seed a new member (PostgreSQL): give the new member a copy of the database made with 'plasma admin backup'")
	}
	path = filepath.Join(g.cfg.Dir, "seed-"+m.ID+".db")
	os.Remove(path) // a crash's, or an earlier term's
	pos, err := st.BackupAt(path)
	if err == nil && pos < seq {
		os.Remove(path)
		err = fmt.Errorf("the store holds the log through position %d, short of the snapshot's %d", pos, seq)
	}
	if err != nil {
		return "", nil, fmt.Errorf("namenode group: copy the store to seed a member: %w", err)
	}
	g.fmu.Lock()
	h := seedHeader{Group: g.file.Group, Namespace: g.file.Namespace, Base: g.file.Base, Seq: pos}
	g.fmu.Unlock()
	hb, _ := json.Marshal(h)
	return path, append(append([]byte(seedMagic), hb...), '\n'), nil
}

// removeSeedLeftovers removes copies a crash left in dir.
func removeSeedLeftovers(dir string) {
	for _, pat := range []string{"seed-*.db", ".seed-*", "restore.db*"} {
		ms, _ := filepath.Glob(filepath.Join(dir, pat))
		for _, m := range ms {
			os.Remove(m)
		}
	}
}

// seedAtStart applies the newest snapshot if it is a seed the store does
// not hold yet (received, then a crash before or while the store took
// it), and refuses a store that lacks what the member's own snapshot
// says it held (Raft's log before it may be gone).
func (g *Group) seedAtStart(snaps *groupSnapshots) error {
	list, err := snaps.List()
	if err != nil || len(list) == 0 {
		return err
	}
	m, rc, err := snaps.FileSnapshotStore.Open(list[0].ID)
	if err != nil {
		return fmt.Errorf("namenode group: snapshot %s: %w", list[0].ID, err)
	}
	defer rc.Close()
	return g.restore(rc, m.Size == positionSize)
}

// bootstrap starts a new group's state: a snapshot at entry 1 with every
// member in the configuration, as the first term (raft.BootstrapCluster
// writes the configuration as entry 1 of the log instead). The log then
// never holds the group's formation, so a new member's catching up
// always starts with a copy of a store.
func (g *Group) bootstrap(snaps raft.SnapshotStore) error {
	var conf raft.Configuration
	for _, p := range g.cfg.Peers {
		ra, _ := RaftAddr(p.Addr)
		conf.Servers = append(conf.Servers, raft.Server{ID: raft.ServerID(p.ID), Address: raft.ServerAddress(ra), Suffrage: raft.Voter})
	}
	if err := g.state.SetUint64([]byte("CurrentTerm"), 1); err != nil {
		return err
	}
	sink, err := snaps.Create(raft.SnapshotVersionMax, 1, 1, conf, 1, g.trans)
	if err != nil {
		return err
	}
	if _, err := sink.Write(binary.BigEndian.AppendUint64(nil, g.file.Base)); err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

// Snapshot: the checkpoint store is the member's snapshot; what Raft
// keeps is only the log position the store holds durably (once Persist
// returns), so the log before it can go.
func (f groupFSM) Snapshot() (raft.FSMSnapshot, error) {
	c := f.g.ckpt
	c.mu.Lock()
	seq := c.last
	c.mu.Unlock()
	return groupSnapshot{g: f.g, seq: seq}, nil
}

// Restore takes a seed from the leader (this member was too far behind
// for the log, or is new), or a snapshot of this member's own.
func (f groupFSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	return f.g.restore(rc, false)
}

// restore reads a snapshot (own: this member's, 8 bytes; else a seed) and
// makes the store hold it: a seed replaces the store's content unless the
// store holds as much already.
func (g *Group) restore(r io.Reader, own bool) error {
	br := bufio.NewReaderSize(r, 1<<16)
	if own {
		var b [positionSize]byte
		if _, err := io.ReadFull(br, b[:]); err != nil {
			return fmt.Errorf("namenode group snapshot: %w", err)
		}
		seq := binary.BigEndian.Uint64(b[:])
		c := g.ckpt
		c.mu.Lock()
		last := c.last
		c.mu.Unlock()
		if seq > last && !g.awaitingSeed() {
			return fmt.Errorf("this member's store holds the group's log up to position %d, but its own snapshot says %d: the store lost what it held; "+
				"stop this member and bring it back as a new member (remove it, move %s away, start it with -join %s, add it)", last, seq, g.cfg.Dir, g.file.Group)
		}
		return nil
	}
	magic := make([]byte, len(seedMagic))
	if _, err := io.ReadFull(br, magic); err != nil || string(magic) != seedMagic {
		return fmt.Errorf("namenode group: a snapshot that is not a copy of a store (%q)", magic)
	}
	line, err := br.ReadSlice('\n')
	if err != nil {
		return fmt.Errorf("namenode group: seed header: %w", err)
	}
	var h seedHeader
	if err := json.Unmarshal(line, &h); err != nil {
		return fmt.Errorf("namenode group: seed header: %w", err)
	}
	g.fmu.Lock()
	gf := g.file
	g.fmu.Unlock()
	switch {
	case h.Group != gf.Group:
		return fmt.Errorf("namenode group: a copy of the store of group %s, not of this member's group %s", h.Group, gf.Group)
	case !gf.AwaitingSeed && (h.Namespace != gf.Namespace || h.Base != gf.Base):
		return fmt.Errorf("namenode group: a copy of namespace %s from position %d, but this member replicates namespace %s from %d", h.Namespace, h.Base, gf.Namespace, gf.Base)
	}
	c := g.ckpt
	if err := c.waitAll(); err != nil {
		return err
	}
	c.mu.Lock()
	held := c.done
	c.mu.Unlock()
	if !gf.AwaitingSeed && held >= h.Seq {
		_, err := io.Copy(io.Discard, br)
		return err
	}
	if err := g.reseed(br, h); err != nil {
		err = fmt.Errorf("namenode group: seed the store with the leader's copy: %w", err)
		g.cfg.Logger.Error("cannot take the leader's copy of its store", "err", err)
		return err
	}
	c.reset(h.Seq)
	g.fmu.Lock()
	g.file.Namespace, g.file.Base, g.file.AwaitingSeed = h.Namespace, h.Base, false
	gf = g.file
	g.fmu.Unlock()
	if err := writeGroupFile(g.cfg.Dir, gf); err != nil {
		return err
	}
	// Warn: a member falling this far behind is worth an operator's look
	// (unless it was just added).
	g.cfg.Logger.Warn("namenode group: this member was new or too far behind for the group's log: its store was seeded with the leader's copy", "group", h.Group, "position", h.Seq)
	return nil
}

// reseed replaces the store's content with the database r holds.
func (g *Group) reseed(r io.Reader, h seedHeader) error {
	rs, ok := g.cfg.Store.(meta.Reseeder)
	if !ok {
		return errors.New("this member's metadata store cannot be seeded")
	}
	tmp := filepath.Join(g.cfg.Dir, "restore.db")
	removeSeedLeftovers(g.cfg.Dir)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	defer removeSeedLeftovers(g.cfg.Dir)
	if err != nil {
		return err
	}
	src, err := meta.OpenSQLiteWith(tmp, meta.SQLiteOptions{ReadOnly: true})
	if err != nil {
		return err
	}
	defer src.Close()
	if err := rs.Reseed(context.Background(), src, h.Seq); err != nil {
		return err
	}
	if sy, ok := g.cfg.Store.(meta.Syncer); ok {
		return sy.Sync()
	}
	return nil
}

// reset makes the checkpointer, idle, start from a store that holds the
// log through seq (it was just seeded).
func (c *checkpointer) reset(seq uint64) {
	c.mu.Lock()
	c.last, c.done = seq, seq
	c.cond.Broadcast()
	c.mu.Unlock()
}

type groupSnapshot struct {
	g   *Group
	seq uint64
}

func (s groupSnapshot) Persist(sink raft.SnapshotSink) error {
	c := s.g.ckpt
	err := c.wait(s.seq)
	if err == nil {
		err = s.g.cfg.Store.(meta.Syncer).Sync()
	}
	if err == nil {
		_, err = sink.Write(binary.BigEndian.AppendUint64(nil, s.seq))
	}
	if err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

func (groupSnapshot) Release() {}

// StoreConfiguration records a change of the group's members in the
// group file (raft's ConfigurationStore, called in order with the
// entries): a restart checks -peers against it, and a member removed
// refuses to start again.
func (f groupFSM) StoreConfiguration(_ uint64, conf raft.Configuration) {
	g := f.g
	g.fmu.Lock()
	g.file.Members = peersOf(conf)
	g.file.Removed = !slices.ContainsFunc(g.file.Members, func(p Peer) bool { return p.ID == g.cfg.Self })
	gf := g.file
	g.fmu.Unlock()
	if err := writeGroupFile(g.cfg.Dir, gf); err != nil {
		g.cfg.Logger.Error("cannot record the group's members", "err", err)
	}
	if gf.Removed {
		g.cfg.Logger.Warn("this member was removed from the namenode group: stop it", "group", gf.Group, "id", g.cfg.Self)
	}
}

// peersOf lists the members of conf with their client addresses.
func peersOf(conf raft.Configuration) []Peer {
	var out []Peer
	for _, s := range conf.Servers {
		out = append(out, Peer{ID: string(s.ID), Addr: clientAddr(string(s.Address))})
	}
	return out
}

// configuration is the group's latest configuration as this member knows
// it (possibly not yet committed).
func (g *Group) configuration() raft.Configuration {
	f := g.raft.GetConfiguration()
	if f.Error() != nil {
		return raft.Configuration{}
	}
	return f.Configuration()
}

// members is the group's members as this member knows them.
func (g *Group) members() []Peer { return peersOf(g.configuration()) }

func (g *Group) awaitingSeed() bool {
	g.fmu.Lock()
	defer g.fmu.Unlock()
	return g.file.AwaitingSeed
}

func (g *Group) base() uint64 {
	g.fmu.Lock()
	defer g.fmu.Unlock()
	return g.file.Base
}
