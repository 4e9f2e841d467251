package kv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"path"
	"slices"
	"sort"
	"time"

	"github.com/plasmafs/plasma/client"
)

// Writer is the database's one writer: a batch of inserts and deletes
// that Commit makes visible atomically, as one PlasmaFS transaction. It
// builds on the newest version at Begin; readers keep their snapshots and
// are never blocked. A Writer is not for concurrent use.
//
// A writer that dies before Commit returns (killed, disconnected) leaves
// the database as it was: its transaction is aborted by the namenode, and
// the blocks it wrote are never referenced.
type Writer struct {
	db   *DB
	tx   *client.Txn
	snap *Snapshot // the version this batch builds on
	f    *client.File
	bs   int64
	max  int // key length limit

	changes map[string]*change
	staged  []*change // values in stage, placed at placement
	stage   []byte    // value bytes not yet placed in the file
	weight  int       // estimated index bytes of the batch

	placed     bool
	compact    bool
	stagedBase int64           // where the stage went
	pos        int64           // next write offset
	remap      map[int64]vref  // compaction: tail values moved (old offset → new)
	live       int64           // live bytes of the new version
	written    map[int64]*node // nodes written by this commit (branches with their children)
	stats      CommitStats
	buf        []byte // copy buffer
	done       bool
	err        error
}

type change struct {
	key    []byte
	del    bool
	v      vref
	staged bool // v.off is an offset into the stage
}

// CommitStats tell what a commit wrote.
type CommitStats struct {
	Version   uint64
	Compacted bool  // the commit rewrote the tail in place
	Relocated int64 // bytes of tail values moved by the compaction
	Written   int64 // bytes written to the database file (values, index, trailer)
	Start     int64 // file offset where the commit's writing began
}

// Begin starts a batch. It fails at once with an error matching ErrLocked
// (and client.ErrConflict) if another writer or a vacuum holds the
// database: PlasmaFS locks never wait. The batch builds on the newest
// committed version.
//
// ctx must stay valid until Commit or Abort: the writer's file writes use
// it.
func (db *DB) Begin(ctx context.Context) (*Writer, error) {
	if db.c == nil {
		return nil, errors.New("kv: a local database file is read-only")
	}
	tx, snap, err := db.lock(ctx)
	if err != nil {
		return nil, err
	}
	f, err := tx.OpenInode(ctx, snap.file)
	if err != nil {
		snap.Release()
		tx.Abort(ctx)
		return nil, err
	}
	return &Writer{db: db, tx: tx, snap: snap, f: f, bs: snap.bs, max: int(snap.tr.maxKey),
		changes: map[string]*change{}, live: snap.tr.live}, nil
}

// lock takes the writer lock in a new transaction and opens the newest
// version (after the lock, so no other writer can commit in between).
func (db *DB) lock(ctx context.Context) (*client.Txn, *Snapshot, error) {
	var tx *client.Txn
	var fi client.FileInfo
	var err error
	for attempt := 0; ; attempt++ {
		tx = db.c.Begin()
		fi, err = tx.Lookup(ctx, path.Join(db.path, lockName))
		if err == nil {
			break
		}
		tx.Abort(ctx)
		if attempt == 0 && lostConnection(ctx, err) {
			continue // the client has replaced its connection
		}
		if errors.Is(err, client.ErrNotFound) {
			return nil, nil, fmt.Errorf("%s: not a Plasma KV database: %w", db.path, err)
		}
		return nil, nil, fmt.Errorf("%s: %w", db.path, err)
	}
	now := time.Now()
	if _, err := tx.SetAttr(ctx, fi.Ino, client.SetAttr{Mtime: &now}); err != nil {
		tx.Abort(ctx)
		if errors.Is(err, client.ErrConflict) {
			return nil, nil, &lockedError{db.path, err}
		}
		return nil, nil, fmt.Errorf("%s: lock: %w", db.path, err)
	}
	snap, err := db.openSnapshot(ctx)
	if err != nil {
		tx.Abort(ctx)
		return nil, nil, err
	}
	return tx, snap, nil
}

type lockedError struct {
	path string
	err  error
}

func (e *lockedError) Error() string {
	return e.path + ": database is locked by another writer (or vacuum); try again when it has finished"
}

func (e *lockedError) Is(target error) bool { return target == ErrLocked }
func (e *lockedError) Unwrap() error        { return e.err }

// Version returns the version the batch builds on; Commit makes the next.
func (w *Writer) Version() uint64 { return w.snap.tr.seq }

// Snapshot returns the version the batch builds on (without the batch's
// changes). It is valid until Commit or Abort.
func (w *Writer) Snapshot() *Snapshot { return w.snap }

func (w *Writer) check(key []byte) error {
	if w.done {
		return ErrClosed
	}
	if w.err != nil {
		return w.err
	}
	if len(key) > w.max {
		return fmt.Errorf("%w: %d bytes (limit %d)", ErrKeyTooLong, len(key), w.max)
	}
	return nil
}

// Put inserts or replaces key.
func (w *Writer) Put(key, value []byte) error {
	if err := w.check(key); err != nil {
		return err
	}
	if len(value) <= inlineMax {
		w.set(&change{key: bytes.Clone(key), v: vref{inline: bytes.Clone(value)}})
		return nil
	}
	return w.PutReader(key, bytes.NewReader(value))
}

// PutReader inserts or replaces key with the bytes of r up to EOF,
// streamed into the database file (never held whole in memory). If r
// fails, the batch is unusable: Abort it.
func (w *Writer) PutReader(key []byte, r io.Reader) error {
	if err := w.check(key); err != nil {
		return err
	}
	var head [inlineMax + 1]byte
	n, err := io.ReadFull(r, head[:])
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		w.set(&change{key: bytes.Clone(key), v: vref{inline: bytes.Clone(head[:n])}})
		return nil
	}
	if err != nil {
		return w.fail(err)
	}
	c := &change{key: bytes.Clone(key), v: vref{ext: true}}
	crc := crc32.Update(0, castagnoli, head[:n])
	total := int64(n)
	if !w.placed {
		c.staged = true
		c.v.off = int64(len(w.stage))
		w.stage = append(w.stage, head[:n]...)
		// Stage until the batch turns out large (then place it).
		for !w.placed {
			if len(w.stage) > int(w.bs/2) {
				if err := w.place(true); err != nil {
					return err
				}
				break
			}
			w.stage = slices.Grow(w.stage, 32<<10)
			m, err := r.Read(w.stage[len(w.stage):cap(w.stage)])
			crc = crc32.Update(crc, castagnoli, w.stage[len(w.stage):len(w.stage)+m])
			w.stage = w.stage[:len(w.stage)+m]
			total += int64(m)
			if err == io.EOF {
				c.v.n, c.v.crc = total, crc
				w.staged = append(w.staged, c)
				w.set(c)
				return nil
			}
			if err != nil {
				return w.fail(err)
			}
		}
		// Placed meanwhile: the staged part moved to the file; go on there.
		c.staged = false
		c.v.off += w.stagedBase
	} else {
		c.v.off = w.pos
		if err := w.write(head[:n]); err != nil {
			return err
		}
	}
	if w.buf == nil {
		w.buf = make([]byte, min(w.bs, 1<<20))
	}
	buf := w.buf
	for {
		m, err := r.Read(buf)
		if m > 0 {
			crc = crc32.Update(crc, castagnoli, buf[:m])
			total += int64(m)
			if werr := w.write(buf[:m]); werr != nil {
				return werr
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return w.fail(err)
		}
	}
	c.v.n, c.v.crc = total, crc
	w.set(c)
	return nil
}

// Delete removes key (nothing happens if it does not exist).
func (w *Writer) Delete(key []byte) error {
	if err := w.check(key); err != nil {
		return err
	}
	w.set(&change{key: bytes.Clone(key), del: true})
	return nil
}

func (w *Writer) set(c *change) {
	w.changes[string(c.key)] = c
	w.weight += len(c.key) + 24
	if !c.v.ext {
		w.weight += len(c.v.inline)
	}
}

func (w *Writer) fail(err error) error {
	if w.err == nil {
		w.err = err
	}
	return err
}

// write appends p at w.pos.
func (w *Writer) write(p []byte) error {
	if w.err != nil {
		return w.err
	}
	if _, err := w.f.WriteAt(p, w.pos); err != nil {
		return w.fail(err)
	}
	w.pos += int64(len(p))
	w.stats.Written += int64(len(p))
	return nil
}

// place decides where the batch goes and writes the staged values there.
//
// A small batch goes to the next block boundary after the end of the
// file: the previous commit's partial last block stays as it is (its
// unused rest is padding), so a small commit writes only its own bytes.
// Every TailCommits-th small commit, and every large one, compacts
// instead: it truncates the file to the sealed offset and writes there,
// first the live values of the small commits since the last compaction
// (the tail), then its own; at commit every index node in the tail is
// rewritten too. Only the block holding the sealed offset is read and
// rewritten, once per compaction, and the padding of the tail is
// reclaimed. Everything before the new trailer is then sealed.
func (w *Writer) place(large bool) error {
	tr := w.snap.tr
	w.placed = true
	if large || int(tr.tail)+1 >= w.db.opt.TailCommits {
		w.compact = true
		if err := w.f.Truncate(tr.sealed); err != nil {
			return w.fail(err)
		}
		w.pos = tr.sealed
		w.stats.Start = w.pos
		if err := w.relocateTail(); err != nil {
			return w.fail(err)
		}
	} else {
		w.pos = (w.snap.size + w.bs - 1) / w.bs * w.bs
		w.stats.Start = w.pos
	}
	w.stagedBase = w.pos
	if err := w.write(w.stage); err != nil {
		return err
	}
	for _, c := range w.staged {
		c.staged = false
		c.v.off += w.stagedBase
	}
	w.stage, w.staged = nil, nil
	return nil
}

// relocateTail copies the live values stored at or after the sealed
// offset to w.pos and records where they went. Only nodes in the tail can
// reference the tail (references point backwards, and everything before
// the sealed offset was written before it).
func (w *Writer) relocateTail() error {
	sealed := w.snap.tr.sealed
	var vals []vref
	var walk func(c child) error
	walk = func(c child) error {
		if c.off < sealed {
			return nil
		}
		nd, err := w.snap.node(c.off, c.n)
		if err != nil {
			return err
		}
		if nd.leaf {
			for _, e := range nd.entries {
				if e.v.ext && e.v.off >= sealed {
					vals = append(vals, e.v)
				}
			}
			return nil
		}
		for _, k := range nd.kids {
			if err := walk(k); err != nil {
				return err
			}
		}
		return nil
	}
	if root, ok := w.snap.root(); ok {
		if err := walk(root); err != nil {
			return err
		}
	}
	sort.Slice(vals, func(i, j int) bool { return vals[i].off < vals[j].off })
	w.remap = map[int64]vref{}
	buf := make([]byte, min(w.bs, 1<<20))
	for _, v := range vals {
		nv := v
		nv.off = w.pos
		for done := int64(0); done < v.n; {
			b := buf[:min(int64(len(buf)), v.n-done)]
			if err := w.snap.readDirect(b, v.off+done); err != nil {
				return err
			}
			if err := w.write(b); err != nil {
				return err
			}
			done += int64(len(b))
		}
		w.remap[v.off] = nv
		w.stats.Relocated += v.n
	}
	return nil
}

// Abort drops the batch.
func (w *Writer) Abort(ctx context.Context) error {
	if w.done {
		return nil
	}
	w.done = true
	w.snap.Release()
	return w.tx.Abort(ctx)
}

// Commit writes the changed index nodes and the trailer and commits the
// transaction; the new version is durable when it returns nil. The
// database's current snapshot is then refreshed. A Writer is finished
// after Commit, whatever the outcome. An error matching
// client.ErrCommitUnknown means the outcome is unknown (look at the
// database).
func (w *Writer) Commit(ctx context.Context) error {
	_, err := w.CommitStats(ctx)
	return err
}

// CommitStats is Commit, also telling what the commit wrote.
func (w *Writer) CommitStats(ctx context.Context) (CommitStats, error) {
	if w.done {
		return w.stats, ErrClosed
	}
	if w.err != nil {
		w.Abort(ctx)
		return w.stats, w.err
	}
	if len(w.changes) == 0 && !w.placed {
		w.stats.Version = w.snap.tr.seq
		return w.stats, w.Abort(ctx)
	}
	if err := w.commit(ctx); err != nil {
		w.Abort(ctx)
		return w.stats, err
	}
	w.done = true
	w.snap.Release()
	w.db.Refresh(ctx) // best effort: the commit stands either way
	return w.stats, nil
}

func (w *Writer) commit(ctx context.Context) error {
	if !w.placed {
		if err := w.place(w.weight+len(w.stage) > int(w.bs/2)); err != nil {
			return err
		}
	}
	chs := make([]*change, 0, len(w.changes))
	for _, c := range w.changes {
		chs = append(chs, c)
	}
	sort.Slice(chs, func(i, j int) bool { return bytes.Compare(chs[i].key, chs[j].key) < 0 })
	for _, c := range chs {
		if c.v.ext && !c.del {
			w.live += c.v.n
		}
	}
	w.written = map[int64]*node{}
	var kids []child
	var err error
	if root, ok := w.snap.root(); ok {
		kids, err = w.merge(root, chs)
	} else {
		var es []entry
		for _, c := range chs {
			if !c.del {
				es = append(es, entry{key: c.key, v: c.v})
			}
		}
		kids, err = w.writeLeaves(es)
	}
	if err != nil {
		return err
	}
	// A root with one child gives way to the child.
	for len(kids) == 1 {
		nd, err := w.nodeAt(kids[0])
		if err != nil {
			return err
		}
		if nd.leaf || len(nd.kids) != 1 {
			break
		}
		w.live -= int64(kids[0].n)
		kids = nd.kids
	}
	for len(kids) > 1 {
		if kids, err = w.writeBranches(kids); err != nil {
			return err
		}
	}
	old := w.snap.tr
	tr := trailer{seq: old.seq + 1, maxKey: old.maxKey, sealed: old.sealed, gen: old.gen, tail: old.tail + 1}
	if len(kids) == 1 {
		tr.rootOff, tr.rootLen, tr.count = kids[0].off, kids[0].n, kids[0].count
	}
	if w.compact {
		tr.sealed, tr.gen, tr.tail = w.pos, old.gen+1, 0
	}
	tr.live = w.live
	if err := w.write(tr.encode()); err != nil {
		return err
	}
	w.stats.Version = tr.seq
	w.stats.Compacted = w.compact
	if err := w.tx.Commit(ctx); err != nil {
		w.done = true // the transaction is over either way
		w.snap.Release()
		return err
	}
	return nil
}

// nodeAt returns a node written by this commit or one of the snapshot.
func (w *Writer) nodeAt(c child) (*node, error) {
	if c.off >= w.stats.Start {
		// Written by this commit (old nodes there were all rewritten).
		if nd, ok := w.written[c.off]; ok {
			return nd, nil
		}
		return nil, fmt.Errorf("kv: internal error: node at %d not written by this commit", c.off)
	}
	return w.snap.node(c.off, c.n)
}

// merge applies the sorted changes chs (all within c's key range) to the
// subtree at c and returns the entries replacing c at its level (none if
// the subtree became empty, several if it split).
func (w *Writer) merge(c child, chs []*change) ([]child, error) {
	force := w.compact && c.off >= w.snap.tr.sealed
	if len(chs) == 0 && !force {
		return []child{c}, nil
	}
	nd, err := w.snap.node(c.off, c.n)
	if err != nil {
		return nil, err
	}
	if nd.leaf {
		es, changed := w.mergeEntries(nd.entries, chs)
		if !changed && !force {
			return []child{c}, nil
		}
		w.live -= int64(c.n)
		return w.writeLeaves(es)
	}
	var kids []child
	same := true
	for i, k := range nd.kids {
		j := len(chs)
		if i+1 < len(nd.kids) {
			next := nd.kids[i+1].key
			j = sort.Search(len(chs), func(j int) bool { return bytes.Compare(chs[j].key, next) >= 0 })
		}
		sub, err := w.merge(k, chs[:j])
		if err != nil {
			return nil, err
		}
		if len(sub) != 1 || sub[0].off != k.off {
			same = false
		}
		kids = append(kids, sub...)
		chs = chs[j:]
	}
	if same && !force {
		return []child{c}, nil
	}
	w.live -= int64(c.n)
	return w.writeBranches(kids)
}

// mergeEntries merges sorted changes into a leaf's entries (moving values
// the compaction relocated).
func (w *Writer) mergeEntries(old []entry, chs []*change) ([]entry, bool) {
	out := make([]entry, 0, len(old)+len(chs))
	changed := false
	keep := func(e entry) {
		if e.v.ext {
			if nv, ok := w.remap[e.v.off]; ok {
				e.v = nv
			}
		}
		out = append(out, e)
	}
	drop := func(e entry) {
		if e.v.ext {
			w.live -= e.v.n
		}
		changed = true
	}
	i := 0
	for _, c := range chs {
		for i < len(old) && bytes.Compare(old[i].key, c.key) < 0 {
			keep(old[i])
			i++
		}
		if i < len(old) && bytes.Equal(old[i].key, c.key) {
			drop(old[i])
			i++
		}
		if !c.del {
			out = append(out, entry{key: c.key, v: c.v})
			changed = true
		}
	}
	for ; i < len(old); i++ {
		keep(old[i])
	}
	return out, changed
}

// pack splits entries of the given encoded sizes into nodes of about
// target bytes (the last two balanced).
func pack(sizes []int, target int) [][2]int {
	var groups [][2]int
	start, cur := 0, nodeHeader+nodeCRC
	for i, s := range sizes {
		if i > start && cur+s > target {
			groups = append(groups, [2]int{start, i})
			start, cur = i, nodeHeader+nodeCRC
		}
		cur += s
	}
	groups = append(groups, [2]int{start, len(sizes)})
	if n := len(groups); n >= 2 && cur < target/2 {
		a, b := groups[n-2][0], groups[n-1][1]
		total := 0
		for _, s := range sizes[a:b] {
			total += s
		}
		mid, acc := a, 0
		for mid < b-1 && acc+sizes[mid] <= total/2 {
			acc += sizes[mid]
			mid++
		}
		mid = max(mid, a+1)
		groups[n-2], groups[n-1] = [2]int{a, mid}, [2]int{mid, b}
	}
	return groups
}

func (w *Writer) writeLeaves(es []entry) ([]child, error) {
	if len(es) == 0 {
		return nil, nil
	}
	sizes := make([]int, len(es))
	for i := range es {
		sizes[i] = leafEntrySize(&es[i])
	}
	var out []child
	for _, g := range pack(sizes, nodeTarget(w.snap.tr.maxKey)) {
		b := encodeLeaf(es[g[0]:g[1]])
		c := child{key: es[g[0]].key, off: w.pos, n: uint32(len(b)), count: uint64(g[1] - g[0])}
		if err := w.write(b); err != nil {
			return nil, err
		}
		w.live += int64(len(b))
		w.written[c.off] = &node{leaf: true, size: len(b)}
		out = append(out, c)
	}
	return out, nil
}

func (w *Writer) writeBranches(cs []child) ([]child, error) {
	if len(cs) == 0 {
		return nil, nil
	}
	sizes := make([]int, len(cs))
	for i := range cs {
		sizes[i] = childSize(&cs[i])
	}
	var out []child
	for _, g := range pack(sizes, nodeTarget(w.snap.tr.maxKey)) {
		kids := cs[g[0]:g[1]]
		b := encodeBranch(kids)
		c := child{key: kids[0].key, off: w.pos, n: uint32(len(b))}
		for _, k := range kids {
			c.count += k.count
		}
		if err := w.write(b); err != nil {
			return nil, err
		}
		w.live += int64(len(b))
		w.written[c.off] = &node{kids: slices.Clone(kids), size: len(b)}
		out = append(out, c)
	}
	return out, nil
}
