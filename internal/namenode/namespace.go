package namenode

import (
	"github.com/plasmafs/plasma/internal/meta"
	"github.com/plasmafs/plasma/internal/wire"
)

// namespace is the namespace table: the committed inodes, directory
// entries and block lists, read through each transaction's uncommitted
// changes (its private attributes, entries, block lists and moved
// directories) as an overlay, so a transaction sees its own writes and
// the committed state otherwise. It also resolves paths (paths.go).
// Taking a private copy to change locks the inode in the lock table;
// applying committed changes is the committer's (commit.go).
//
// Lock discipline: no mutex of its own; guarded by Namenode.mu, which
// every reader and writer holds.
type namespace struct {
	inodes map[uint64]*inode
	locks  *lockTable
}

func newNamespace(locks *lockTable) *namespace {
	return &namespace{inodes: map[uint64]*inode{}, locks: locks}
}

// use records tx as a user of ino, so an unlink does not delete it while
// tx may still read it.
func (ns *namespace) use(tx *Txn, ino uint64) {
	if tx.used[ino] {
		return
	}
	in := ns.inodes[ino]
	if in == nil {
		return
	}
	if tx.used == nil {
		tx.used = map[uint64]bool{}
		tx.seqSeen = map[uint64]uint64{}
	}
	tx.used[ino] = true
	tx.seqSeen[ino] = in.attr.Seq
	in.users++
}

// attr returns ino's attributes as tx sees them (nil if missing).
func (ns *namespace) attr(tx *Txn, ino uint64) *wire.Attr {
	if tx != nil {
		if a := tx.inodes[ino]; a != nil {
			return a
		}
	}
	if in := ns.inodes[ino]; in != nil && (in.attr.Nlink > 0 || ino == rootIno || tx != nil && tx.used[ino]) {
		return &in.attr
	}
	return nil
}

// mutAttr locks ino for tx and returns its private, modifiable attributes.
func (ns *namespace) mutAttr(tx *Txn, ino uint64) (*wire.Attr, error) {
	if a := tx.inodes[ino]; a != nil {
		return a, nil
	}
	in := ns.inodes[ino]
	if in == nil {
		return nil, errNotFound
	}
	if err := ns.locks.exclusive(tx, inodeKey(ino)); err != nil {
		return nil, err
	}
	// First committer wins: a file whose data changed since this
	// transaction read it cannot be written by it (no lost updates).
	if seq, ok := tx.seqSeen[ino]; ok && seq != in.attr.Seq {
		return nil, errConflict
	}
	a := in.attr
	if tx.inodes == nil {
		tx.inodes = map[uint64]*wire.Attr{}
	}
	tx.inodes[ino] = &a
	ns.use(tx, ino)
	return &a, nil
}

// entry returns the inode a name refers to as tx sees it (0 if none).
func (ns *namespace) entry(tx *Txn, parent uint64, name string) uint64 {
	if tx != nil {
		if ino, ok := tx.entries[meta.EntryKey{Parent: parent, Name: name}]; ok {
			return ino
		}
	}
	if in := ns.inodes[parent]; in != nil && in.entries != nil {
		return in.entries[name]
	}
	return 0
}

func (ns *namespace) setEntry(tx *Txn, parent uint64, name string, ino uint64) {
	if tx.entries == nil {
		tx.entries = map[meta.EntryKey]uint64{}
	}
	tx.entries[meta.EntryKey{Parent: parent, Name: name}] = ino
	if tx.touched == nil {
		tx.touched = map[uint64]bool{}
	}
	tx.touched[parent] = true
}

// list returns the entries of directory ino as tx sees them.
func (ns *namespace) list(tx *Txn, ino uint64) map[string]uint64 {
	out := map[string]uint64{}
	if in := ns.inodes[ino]; in != nil {
		for k, v := range in.entries {
			out[k] = v
		}
	}
	if tx != nil {
		for k, v := range tx.entries {
			if k.Parent != ino {
				continue
			}
			if v == 0 {
				delete(out, k.Name)
			} else {
				out[k.Name] = v
			}
		}
	}
	return out
}

// ownAttr returns tx's private attributes of ino, if it changed or
// created it (tx may be nil).
func (tx *Txn) ownAttr(ino uint64) *wire.Attr {
	if tx == nil {
		return nil
	}
	return tx.inodes[ino]
}

// blockList returns ino's block list as tx sees it. The committed list,
// once handed to tx, stays the same until tx ends.
func (ns *namespace) blockList(tx *Txn, ino uint64) []wire.Extent {
	xs, _ := ns.fileVersion(tx, ino)
	return xs
}

// fileVersion returns ino's block list and the size of the same version,
// as tx sees them: its own uncommitted version, or the committed one it
// first read (repeatable until tx ends).
func (ns *namespace) fileVersion(tx *Txn, ino uint64) ([]wire.Extent, int64) {
	if tx != nil {
		if a, own := tx.inodes[ino]; own {
			if xs, ok := tx.blocks[ino]; ok {
				return xs, a.Size
			}
			if v, ok := tx.seen[ino]; ok {
				return v.blocks, a.Size
			}
		}
		if v, ok := tx.seen[ino]; ok {
			return v.blocks, v.size
		}
	}
	in := ns.inodes[ino]
	if in == nil {
		if a := tx.ownAttr(ino); a != nil {
			return nil, a.Size // created by tx, no blocks yet
		}
		return nil, 0
	}
	if tx != nil {
		if tx.seen == nil {
			tx.seen = map[uint64]seenVersion{}
		}
		tx.seen[ino] = seenVersion{blocks: in.blocks, size: in.attr.Size}
		ns.use(tx, ino)
		if a, own := tx.inodes[ino]; own {
			return in.blocks, a.Size
		}
	}
	return in.blocks, in.attr.Size
}
