package kv

import (
	"context"
	"errors"
	"fmt"
	"path"

	"github.com/plasmafs/plasma/client"
)

// VacuumStats tell what Vacuum did.
type VacuumStats struct {
	Version    uint64
	Keys       int64
	OldSize    int64 // bytes of the file before
	NewSize    int64 // and after
	Reclaimed  int64 // OldSize - NewSize
	ValueBytes int64 // bytes of values copied
}

// VacuumOptions tune Vacuum.
type VacuumOptions struct {
	// Rep is the replication of the new file (0: that of the old one).
	Rep int
}

// Vacuum rewrites the database compactly: every live value and a freshly
// packed index go to a new file, which replaces the old one in the same
// transaction. It counts as the writer (a concurrent writer gets
// ErrLocked, and Vacuum fails with ErrLocked while one is active). Readers
// are never blocked: snapshots taken before keep reading the old file,
// which PlasmaFS deletes when the last of them ends. Values are streamed,
// never held whole in memory.
func (db *DB) Vacuum(ctx context.Context, opt VacuumOptions) (VacuumStats, error) {
	var st VacuumStats
	if db.c == nil {
		return st, errors.New("kv: a local database file is read-only")
	}
	tx, snap, err := db.lock(ctx)
	if err != nil {
		return st, err
	}
	defer snap.Release()
	defer tx.Abort(ctx) // a no-op after Commit
	fi, err := tx.StatInode(ctx, snap.file)
	if err != nil {
		return st, err
	}
	rep := opt.Rep
	if rep == 0 {
		rep = fi.Rep
	}
	newPath := path.Join(db.path, vacuumName)
	if err := tx.Unlink(ctx, newPath); err != nil && !errors.Is(err, client.ErrNotFound) {
		return st, err
	}
	f, err := tx.CreateFile(ctx, newPath, client.CreateOptions{Rep: rep, Mode: fi.Mode})
	if err != nil {
		return st, fmt.Errorf("%s: %w", newPath, err)
	}
	b := &builder{f: f, target: nodeTarget(snap.tr.maxKey), buf: make([]byte, min(snap.bs, 1<<20))}
	it := snap.Scan(Range{})
	for it.Next() {
		e := it.cur
		if e.v.ext {
			nv := e.v
			nv.off = b.pos
			for done := int64(0); done < e.v.n; {
				chunk := b.buf[:min(int64(len(b.buf)), e.v.n-done)]
				if err := snap.readDirect(chunk, e.v.off+done); err != nil {
					it.Close()
					return st, err
				}
				if err := b.write(chunk); err != nil {
					it.Close()
					return st, err
				}
				done += int64(len(chunk))
			}
			st.ValueBytes += e.v.n
			e.v = nv
		}
		if err := b.addEntry(e); err != nil {
			it.Close()
			return st, err
		}
	}
	it.Close()
	if err := it.Err(); err != nil {
		return st, err
	}
	root, err := b.finish()
	if err != nil {
		return st, err
	}
	tr := trailer{seq: snap.tr.seq + 1, maxKey: snap.tr.maxKey, count: root.count, sealed: b.pos}
	if root.n > 0 {
		tr.rootOff, tr.rootLen = root.off, root.n
	}
	tr.live = b.pos + trailerSize
	if err := b.write(tr.encode()); err != nil {
		return st, err
	}
	if err := tx.Rename(ctx, newPath, path.Join(db.path, dataName)); err != nil {
		return st, err
	}
	if err := tx.Commit(ctx); err != nil {
		return st, err
	}
	st = VacuumStats{Version: tr.seq, Keys: int64(tr.count), OldSize: snap.size, NewSize: b.pos,
		Reclaimed: snap.size - b.pos, ValueBytes: st.ValueBytes}
	db.Refresh(ctx)
	return st, nil
}

// Vacuum opens the database at dir and vacuums it.
func Vacuum(ctx context.Context, c *client.Client, dir string, opt VacuumOptions) (VacuumStats, error) {
	db, err := Open(ctx, c, dir, Options{CacheBytes: 8 << 20})
	if err != nil {
		return VacuumStats{}, err
	}
	defer db.Close()
	return db.Vacuum(ctx, opt)
}

// builder writes a B+-tree bottom-up from entries in key order, packing
// nodes full; each level keeps its one pending node.
type builder struct {
	f      *client.File
	pos    int64
	target int
	buf    []byte

	leaf      []entry
	leafBytes int
	levels    [][]child // pending branch entries per level (0: above the leaves)
	lbytes    []int
}

func (b *builder) write(p []byte) error {
	if _, err := b.f.WriteAt(p, b.pos); err != nil {
		return err
	}
	b.pos += int64(len(p))
	return nil
}

func (b *builder) addEntry(e entry) error {
	s := leafEntrySize(&e)
	if len(b.leaf) > 0 && nodeHeader+nodeCRC+b.leafBytes+s > b.target {
		if err := b.flushLeaf(); err != nil {
			return err
		}
	}
	b.leaf = append(b.leaf, e)
	b.leafBytes += s
	return nil
}

func (b *builder) flushLeaf() error {
	enc := encodeLeaf(b.leaf)
	c := child{key: b.leaf[0].key, off: b.pos, n: uint32(len(enc)), count: uint64(len(b.leaf))}
	if err := b.write(enc); err != nil {
		return err
	}
	b.leaf, b.leafBytes = nil, 0
	return b.addChild(0, c)
}

func (b *builder) addChild(level int, c child) error {
	if level == len(b.levels) {
		b.levels = append(b.levels, nil)
		b.lbytes = append(b.lbytes, 0)
	}
	s := childSize(&c)
	if len(b.levels[level]) > 0 && nodeHeader+nodeCRC+b.lbytes[level]+s > b.target {
		if err := b.flushLevel(level); err != nil {
			return err
		}
	}
	b.levels[level] = append(b.levels[level], c)
	b.lbytes[level] += s
	return nil
}

func (b *builder) flushLevel(level int) error {
	kids := b.levels[level]
	enc := encodeBranch(kids)
	c := child{key: kids[0].key, off: b.pos, n: uint32(len(enc))}
	for _, k := range kids {
		c.count += k.count
	}
	if err := b.write(enc); err != nil {
		return err
	}
	b.levels[level], b.lbytes[level] = nil, 0
	return b.addChild(level+1, c)
}

// finish writes the pending nodes and returns the root (n 0: empty).
func (b *builder) finish() (child, error) {
	if len(b.leaf) > 0 {
		if err := b.flushLeaf(); err != nil {
			return child{}, err
		}
	}
	for level := 0; level < len(b.levels); level++ {
		if level == len(b.levels)-1 && len(b.levels[level]) == 1 {
			return b.levels[level][0], nil
		}
		if len(b.levels[level]) > 0 {
			if err := b.flushLevel(level); err != nil {
				return child{}, err
			}
		}
	}
	return child{}, nil
}
