package namenode

// Operations on attributes: stat and setattr (mode, owner, times, size,
// replication).

import (
	"fmt"
	"time"

	"github.com/plasmafs/plasma/internal/auth"
	"github.com/plasmafs/plasma/internal/wire"
)

func (n *Namenode) opStat(_ *conn, tx *Txn, who *auth.Identity, q *wire.Request) (*wire.Response, error) {
	if q.Flags&wire.FlagBlocks != 0 {
		return n.openResponse(tx, who, q.Ino, fmt.Sprintf("inode %d", q.Ino))
	}
	return n.attrResponse(tx, q.Ino)
}

func cp(a *wire.Attr) *wire.Attr { c := *a; return &c }

// noInode is the answer for an inode-addressed request whose inode does
// not exist (as tx sees it).
func noInode(ino uint64) error {
	return fail(wire.ErrCodeNotFound, "inode %d: no such file or directory", ino)
}

func (n *Namenode) attrResponse(tx *Txn, ino uint64) (*wire.Response, error) {
	a := n.ns.attr(tx, ino)
	if a == nil {
		return nil, noInode(ino)
	}
	if tx != nil {
		n.ns.use(tx, ino)
	}
	out := cp(a)
	out.Blocksize = n.cfg.Blocksize
	if out.Type == wire.TypeDir && out.Nlink != 0 && tx != nil && len(tx.entries) > 0 {
		out.Nlink = n.txnDirNlink(tx, ino)
	}
	return &wire.Response{Attr: out}, nil
}

// txnDirNlink is directory ino's link count as tx sees it: 2 plus the
// committed subdirectories, with tx's own mkdirs, rmdirs and directory
// moves in and out of ino counted (the committed count follows only at
// commit).
func (n *Namenode) txnDirNlink(tx *Txn, ino uint64) uint32 {
	var committed map[string]uint64
	subdirs := 0
	if in := n.ns.inodes[ino]; in != nil {
		committed, subdirs = in.entries, in.subdirs
	}
	for k, now := range tx.entries {
		if k.Parent != ino {
			continue
		}
		before := committed[k.Name]
		if before == now {
			continue
		}
		if in := n.ns.inodes[before]; before != 0 && in != nil && in.attr.Type == wire.TypeDir {
			subdirs--
		}
		if a := n.ns.attr(tx, now); now != 0 && a != nil && a.Type == wire.TypeDir {
			subdirs++
		}
	}
	return uint32(2 + max(subdirs, 0))
}

func (n *Namenode) setAttr(tx *Txn, who *auth.Identity, q *wire.Request) (*wire.Response, error) {
	// Permissions are checked on the current attributes before the lock is
	// taken: a refused request must not leave the inode locked.
	a := n.ns.attr(tx, q.Ino)
	if a == nil {
		return nil, noInode(q.Ino)
	}
	now := time.Now().UnixNano()
	what := fmt.Sprintf("inode %d", q.Ino)
	owner := who == nil || who.Super() || who.User == a.User
	// POSIX: only the owner (or the superuser) changes the mode; only the
	// superuser gives a file away; the owner may change the group to one
	// of their own groups.
	if q.Flags&wire.FlagMode != 0 && !owner {
		return nil, denied(who, "chmod "+what)
	}
	if q.Flags&wire.FlagOwner != 0 && q.User != a.User && who != nil && !who.Super() {
		return nil, denied(who, "chown "+what)
	}
	if q.Flags&wire.FlagGroup != 0 && q.Group != a.Group && who != nil && !who.Super() && !(owner && who.InGroup(q.Group)) {
		return nil, denied(who, "chgrp "+what)
	}
	if q.Flags&(wire.FlagSize|wire.FlagRep) != 0 && !may(who, a, permWrite) {
		return nil, denied(who, what)
	}
	if q.Flags&wire.FlagMtime != 0 && !owner && !may(who, a, permWrite) {
		return nil, denied(who, "utime "+what)
	}
	if q.Flags&wire.FlagSize != 0 && a.Type != wire.TypeFile {
		return nil, fail(wire.ErrCodeIsDir, "inode %d: only regular files have a settable size", q.Ino)
	}
	if q.Flags&wire.FlagSize != 0 {
		if err := n.checkSize(q.Size, what); err != nil {
			return nil, err
		}
	}
	var err error
	if a, err = n.ns.mutAttr(tx, q.Ino); err != nil {
		if err == errNotFound {
			return nil, noInode(q.Ino)
		}
		return nil, err
	}
	if bs := int64(n.cfg.Blocksize); q.Flags&wire.FlagSize != 0 && q.Size > a.Size && a.Size%bs != 0 && holdsBlock(n.ns.blockList(tx, q.Ino), uint64((a.Size-1)/bs)) {
		// The partly filled last block may hold bytes past the end (an
		// extension in place never committed): a growing file rewrites or
		// extends it, with setblocks (client.File does), so that they
		// never become file content.
		return nil, fail(wire.ErrCodeInvalid, "%s: growing a file whose last block is partly filled takes a write of that block (setblocks), not a bare size change", what)
	}
	if q.Flags&wire.FlagMode != 0 {
		a.Mode = q.Mode & 07777
	}
	if q.Flags&wire.FlagOwner != 0 {
		a.User = q.User
	}
	if q.Flags&wire.FlagGroup != 0 {
		a.Group = q.Group
	}
	if q.Flags&wire.FlagMode != 0 {
		clearForeignSetgid(who, a)
	}
	if q.Flags&wire.FlagRep != 0 {
		rep, err := n.checkRep(q.Rep)
		if err != nil {
			return nil, err
		}
		a.Rep = rep
	}
	if q.Flags&wire.FlagSize != 0 {
		bs := int64(n.cfg.Blocksize)
		if q.Size < a.Size {
			n.dropBlocks(tx, q.Ino, uint64((q.Size+bs-1)/bs))
		}
		a.Size = q.Size
		a.Seq++
		a.Mtime = now
	}
	if q.Flags&wire.FlagMtime != 0 {
		a.Mtime = q.Mtime
	}
	a.Ctime = now
	out := cp(a)
	out.Blocksize = n.cfg.Blocksize
	return &wire.Response{Attr: out}, nil
}

// holdsBlock reports whether the block list xs has file block idx.
func holdsBlock(xs []wire.Extent, idx uint64) bool {
	for _, x := range xs {
		if x.Index <= idx && idx < x.Index+uint64(x.Count) {
			return true
		}
	}
	return false
}
