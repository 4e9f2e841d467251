package namenode

// Operations on names: lookup, readdir and glob, create, link, unlink
// and rename, by path or by directory inode and name.

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/plasmafs/plasma/internal/auth"
	"github.com/plasmafs/plasma/internal/wire"
)

func (n *Namenode) opLookup(_ *conn, tx *Txn, who *auth.Identity, q *wire.Request) (*wire.Response, error) {
	var ino uint64
	var err error
	if q.Flags&wire.FlagAt != 0 {
		// One name in a directory; a symlink is returned, not followed.
		if err := n.atDir(tx, who, q.Ino, q.Path); err != nil {
			return nil, err
		}
		if ino = n.ns.entry(tx, q.Ino, q.Path); ino == 0 {
			return nil, fail(wire.ErrCodeNotFound, "%s: no such file or directory", q.Path)
		}
	} else if ino, err = n.ns.resolve(tx, who, q.Path, q.Flags&wire.FlagNoFollow == 0); err != nil {
		return nil, err
	}
	if q.Flags&wire.FlagBlocks != 0 {
		return n.openResponse(tx, who, ino, q.Path)
	}
	return n.attrResponse(tx, ino)
}

// opGlob answers the matches after Path2, paged like readdir.
func (n *Namenode) opGlob(_ *conn, tx *Txn, who *auth.Identity, q *wire.Request) (*wire.Response, error) {
	paths, err := n.ns.glob(tx, who, q.Path)
	if err != nil {
		return nil, err
	}
	i := sort.SearchStrings(paths, q.Path2)
	if i < len(paths) && paths[i] == q.Path2 {
		i++
	}
	var out []string
	size := 0
	for ; i < len(paths) && len(out) < pageLimit(q.Count) && size < maxPageBytes; i++ {
		out = append(out, paths[i])
		size += len(paths[i]) + 2
	}
	return &wire.Response{Paths: out, Counters: []uint64{moreFlag(i < len(paths))}}, nil
}

func (n *Namenode) opPathOf(_ *conn, tx *Txn, who *auth.Identity, q *wire.Request) (*wire.Response, error) {
	if err := n.reach(tx, who, q.Ino); err != nil {
		return nil, err
	}
	p, err := n.pathOf(tx, q.Ino)
	if err != nil {
		return nil, err
	}
	return &wire.Response{Paths: []string{p}}, nil
}

func (n *Namenode) opCreate(_ *conn, tx *Txn, who *auth.Identity, q *wire.Request) (*wire.Response, error) {
	if q.Flags&wire.FlagAt != 0 {
		if err := n.atDir(tx, who, q.Ino, q.Path); err != nil {
			return nil, err
		}
		return n.createIn(tx, who, q, q.Ino, q.Path)
	}
	return n.create(tx, who, q)
}

func (n *Namenode) opUnlink(_ *conn, tx *Txn, who *auth.Identity, q *wire.Request) (*wire.Response, error) {
	if q.Flags&wire.FlagAt != 0 {
		if err := n.atDir(tx, who, q.Ino, q.Path); err != nil {
			return nil, err
		}
		return nil, n.unlinkIn(tx, who, q.Ino, q.Path, q.Path, q.Flags&wire.FlagDir != 0)
	}
	return nil, n.unlink(tx, who, q.Path, q.Flags&wire.FlagDir != 0)
}

func (n *Namenode) opRename(_ *conn, tx *Txn, who *auth.Identity, q *wire.Request) (*wire.Response, error) {
	noReplace := q.Flags&wire.FlagExcl != 0
	if q.Flags&wire.FlagAt != 0 {
		if err := n.atDir(tx, who, q.Ino, q.Path); err != nil {
			return nil, err
		}
		if err := n.atDir(tx, who, q.Ino2, q.Path2); err != nil {
			return nil, err
		}
		return nil, n.renameIn(tx, who, q.Ino, q.Path, q.Ino2, q.Path2, q.Path, q.Path2, noReplace)
	}
	return nil, n.rename(tx, who, q.Path, q.Path2, noReplace)
}

func (n *Namenode) opLink(_ *conn, tx *Txn, who *auth.Identity, q *wire.Request) (*wire.Response, error) {
	if q.Flags&wire.FlagAt != 0 {
		if err := n.reach(tx, who, q.Ino); err != nil {
			return nil, err
		}
		if err := n.atDir(tx, who, q.Ino2, q.Path2); err != nil {
			return nil, err
		}
		return n.linkIn(tx, who, q.Ino, q.Ino2, q.Path2, fmt.Sprintf("inode %d", q.Ino), q.Path2)
	}
	return n.link(tx, who, q.Path, q.Path2)
}

// atDir checks a request addressed by directory inode and name: the
// directory exists, who may reach and search it, and name is one valid
// file name.
func (n *Namenode) atDir(tx *Txn, who *auth.Identity, dir uint64, name string) error {
	if err := n.reach(tx, who, dir); err != nil {
		return err
	}
	a := n.ns.attr(tx, dir)
	if a == nil {
		return fail(wire.ErrCodeNotFound, "directory inode %d: no such directory", dir)
	}
	if a.Type != wire.TypeDir {
		return fail(wire.ErrCodeNotDir, "inode %d: not a directory", dir)
	}
	if !may(who, a, permSearch) {
		return denied(who, fmt.Sprintf("directory inode %d", dir))
	}
	return checkName(name)
}

// pathOf returns a path of ino as tx sees it (a file with several names:
// one of them).
func (n *Namenode) pathOf(tx *Txn, ino uint64) (string, error) {
	var parts []string
	cur := ino
	for depth := 0; cur != rootIno; depth++ {
		in := n.ns.inodes[cur]
		if in == nil || depth > 4096 {
			return "", noInode(ino)
		}
		var parent uint64
		if in.attr.Type != wire.TypeDir {
			for p := range in.links {
				if parent == 0 || p < parent {
					parent = p
				}
			}
		} else {
			parent = n.ns.parentOf(tx, cur)
		}
		if parent == 0 {
			return "", fail(wire.ErrCodeNotFound, "inode %d has no name (unlinked)", ino)
		}
		name := ""
		for nm, c := range n.ns.list(tx, parent) {
			if c == cur && (name == "" || nm < name) {
				name = nm
			}
		}
		if name == "" {
			return "", fail(wire.ErrCodeNotFound, "inode %d has no name (unlinked)", ino)
		}
		parts = append(parts, name)
		cur = parent
	}
	slices.Reverse(parts)
	return "/" + strings.Join(parts, "/"), nil
}

// Readdir and glob answers are pages: at most maxPage entries of at most
// maxPageBytes in all, so no answer nears the frame limit however large
// the directory.
const (
	maxPage      = 4096
	maxPageBytes = 1 << 20
)

func pageLimit(count uint64) int {
	if count == 0 || count > maxPage {
		return maxPage
	}
	return int(count)
}

func moreFlag(more bool) uint64 {
	if more {
		return 1
	}
	return 0
}

// readDir answers one page of a directory listing: the entries after the
// name Path2 in name order, with their attributes when FlagPlus asks (an
// "ls -l" then costs one round trip per page, not one per entry).
func (n *Namenode) readDir(tx *Txn, who *auth.Identity, q *wire.Request) (*wire.Response, error) {
	ino := q.Ino
	what := q.Path
	if ino == 0 {
		var err error
		if ino, err = n.ns.resolve(tx, who, q.Path, true); err != nil {
			return nil, err
		}
	} else {
		what = fmt.Sprintf("inode %d", ino)
	}
	a := n.ns.attr(tx, ino)
	if a == nil {
		return nil, fail(wire.ErrCodeNotFound, "%s: no such directory", what)
	}
	if a.Type != wire.TypeDir {
		return nil, fail(wire.ErrCodeNotDir, "%s: not a directory", what)
	}
	want := uint32(permRead)
	plus := q.Flags&wire.FlagPlus != 0
	if plus {
		want |= permSearch // attributes of the entries: as a stat of each
	}
	if !may(who, a, want) {
		return nil, denied(who, what)
	}
	names, more := n.listPage(tx, ino, q.Path2, pageLimit(q.Count))
	out := make([]wire.DirEntry, 0, len(names))
	size := 0
	for _, name := range names {
		if size >= maxPageBytes {
			more = true
			break
		}
		c := n.ns.entry(tx, ino, name)
		e := wire.DirEntry{Name: name, Ino: c}
		if ca := n.ns.attr(tx, c); ca != nil {
			e.Type = ca.Type
			if plus {
				e.Attr = cp(ca)
				e.Attr.Blocksize = n.cfg.Blocksize
			}
		}
		if plus && e.Attr == nil {
			e.Attr = &wire.Attr{Ino: c}
		}
		size += len(name) + 100
		out = append(out, e)
	}
	return &wire.Response{Entries: out, Attr: cp(a), Counters: []uint64{moreFlag(more)}}, nil
}

// listPage returns up to limit names of directory dir after the name
// after, in order, as tx sees them, and whether more follow. The committed
// names come from a sorted index kept per directory.
func (n *Namenode) listPage(tx *Txn, dir uint64, after string, limit int) ([]string, bool) {
	var committed []string
	if in := n.ns.inodes[dir]; in != nil && in.entries != nil {
		if in.sorted == nil || len(in.sorted) != len(in.entries) {
			in.sorted = make([]string, 0, len(in.entries))
			for name := range in.entries {
				in.sorted = append(in.sorted, name)
			}
			sort.Strings(in.sorted)
		}
		committed = in.sorted
	}
	i := sort.SearchStrings(committed, after)
	if i < len(committed) && committed[i] == after {
		i++
	}
	var adds []string
	gone := map[string]bool{}
	if tx != nil {
		for k, v := range tx.entries {
			if k.Parent != dir || k.Name <= after {
				continue
			}
			if v == 0 {
				gone[k.Name] = true
			} else {
				adds = append(adds, k.Name)
			}
		}
		sort.Strings(adds)
	}
	var out []string
	j := 0
	for len(out) < limit && (i < len(committed) || j < len(adds)) {
		var name string
		switch {
		case j >= len(adds) || i < len(committed) && committed[i] < adds[j]:
			name = committed[i]
			i++
		case i >= len(committed) || adds[j] < committed[i]:
			name = adds[j]
			j++
		default: // equal: replaced in tx
			name = adds[j]
			i++
			j++
		}
		if !gone[name] {
			out = append(out, name)
		}
	}
	return out, i < len(committed) || j < len(adds)
}

func (n *Namenode) checkRep(rep uint8) (uint8, error) {
	if rep == 0 {
		rep = n.cfg.DefaultRep
	}
	if rep > wire.MaxReplica {
		return 0, fail(wire.ErrCodeInvalid, "replication %d is over the limit of %d", rep, wire.MaxReplica)
	}
	if live := len(n.liveNodes()); int(rep) > live {
		return 0, fail(wire.ErrCodeUnavailable, "replication %d requested but only %d datanodes are alive%s", rep, live, n.outOfService())
	}
	return rep, nil
}

func (n *Namenode) create(tx *Txn, who *auth.Identity, q *wire.Request) (*wire.Response, error) {
	if q.Type == wire.TypeDir && q.Flags&wire.FlagParents != 0 {
		return n.mkdirAll(tx, who, q)
	}
	parent, name, err := n.ns.resolveParent(tx, who, q.Path)
	if err != nil {
		return nil, err
	}
	if q.Type != wire.TypeDir && strings.HasSuffix(q.Path, "/") {
		return nil, fail(wire.ErrCodeIsDir, "%s: a trailing slash names a directory, not a %s", q.Path, q.Type)
	}
	return n.createIn(tx, who, q, parent, name)
}

// claimEntry makes ready for a new name in directory parent (p names it
// in messages), for create and link: who may write and search parent;
// parent is locked shared (no rmdir meanwhile), the name exclusively; it
// is free; the directory's leases admit an addition.
func (n *Namenode) claimEntry(tx *Txn, who *auth.Identity, parent uint64, name, p string) error {
	if err := n.needDir(tx, who, parent, p); err != nil {
		return err
	}
	if err := n.lockShared(tx, parent); err != nil {
		return err
	}
	if err := n.lockEntry(tx, parent, name); err != nil {
		return err
	}
	if n.ns.entry(tx, parent, name) != 0 {
		return fail(wire.ErrCodeExists, "%s: file exists", p)
	}
	return n.admitEntry(tx, parent)
}

func (n *Namenode) createIn(tx *Txn, who *auth.Identity, q *wire.Request, parent uint64, name string) (*wire.Response, error) {
	if err := n.claimEntry(tx, who, parent, name, q.Path); err != nil {
		return nil, err
	}
	now := time.Now().UnixNano()
	a := &wire.Attr{Type: q.Type, Mode: q.Mode & 07777, User: q.User, Group: q.Group, Nlink: 1, Mtime: now, Ctime: now}
	if who != nil {
		// Authenticated: the owner is who asks, not who the request claims;
		// a superuser may name another (the FUSE mount creating for the
		// local user whose permissions the kernel checked).
		a.User, a.Group = who.User, who.PrimaryGroup()
		if who.Super() && q.Flags&wire.FlagOwner != 0 && q.User != "" {
			a.User = q.User
		}
		if who.Super() && q.Flags&wire.FlagGroup != 0 && q.Group != "" {
			a.Group = q.Group
		}
	}
	if a.User == "" {
		a.User = "root"
	}
	if a.Group == "" {
		a.Group = a.User
	}
	switch q.Type {
	case wire.TypeFile:
		rep, err := n.checkRep(q.Rep)
		if err != nil {
			return nil, fail(wire.ErrCodeUnavailable, "%s: %v", q.Path, err)
		}
		a.Rep = rep
		if q.Mode == 0 {
			a.Mode = 0644
		}
	case wire.TypeDir:
		a.Nlink = 2
		if q.Mode == 0 {
			a.Mode = 0755
		}
	case wire.TypeSymlink:
		if q.Path2 == "" {
			return nil, fail(wire.ErrCodeInvalid, "%s: empty symlink target", q.Path)
		}
		a.Mode = 0777
		a.Target = q.Path2
		a.Size = int64(len(q.Path2))
	case wire.TypeFIFO, wire.TypeSocket:
		if q.Mode == 0 {
			a.Mode = 0644
		}
	case wire.TypeCharDevice, wire.TypeBlockDevice:
		if _, err := strconv.ParseUint(q.Path2, 10, 64); err != nil {
			return nil, fail(wire.ErrCodeInvalid, "%s: bad device number %q", q.Path, q.Path2)
		}
		if q.Mode == 0 {
			a.Mode = 0644
		}
		a.Target = q.Path2
	default:
		return nil, fail(wire.ErrCodeInvalid, "%s: bad file type %d", q.Path, q.Type)
	}
	// POSIX: in a setgid directory what is created takes the directory's
	// group, and new directories are setgid too.
	if pa := n.ns.attr(tx, parent); pa != nil && pa.Mode&02000 != 0 {
		a.Group = pa.Group
		if a.Type == wire.TypeDir {
			a.Mode |= 02000
		}
	}
	clearForeignSetgid(who, a)
	ino := n.newIno()
	a.Ino = ino
	if err := n.lockInode(tx, ino); err != nil {
		return nil, err
	}
	if tx.inodes == nil {
		tx.inodes = map[uint64]*wire.Attr{}
	}
	tx.inodes[ino] = a
	n.ns.setEntry(tx, parent, name, ino)
	if q.Type == wire.TypeDir {
		tx.setParent(ino, parent)
	}
	out := cp(a)
	out.Blocksize = n.cfg.Blocksize
	return &wire.Response{Attr: out}, nil
}

func (n *Namenode) mkdirAll(tx *Txn, who *auth.Identity, q *wire.Request) (*wire.Response, error) {
	if err := checkPath(q.Path); err != nil {
		return nil, err
	}
	cur := uint64(rootIno)
	prefix := ""
	for _, name := range splitPath(q.Path) {
		prefix += "/" + name
		if err := checkName(name); err != nil {
			return nil, fail(wire.ErrCodeInvalid, "%s: %v", prefix, err)
		}
		if c := n.ns.entry(tx, cur, name); c != 0 {
			// Follow symlinks to directories as mkdir -p does.
			ino, err := n.ns.resolve(tx, who, prefix, true)
			if err != nil {
				return nil, err
			}
			if a := n.ns.attr(tx, ino); a == nil || a.Type != wire.TypeDir {
				return nil, fail(wire.ErrCodeNotDir, "%s: exists and is not a directory", prefix)
			}
			cur = ino
			continue
		}
		sub := *q
		sub.Path = prefix
		if _, err := n.createIn(tx, who, &sub, cur, name); err != nil {
			return nil, err
		}
		cur = n.ns.entry(tx, cur, name)
	}
	return n.attrResponse(tx, cur)
}

// clearForeignSetgid drops the setgid bit of a file (not a directory)
// whose group the caller, not a superuser, is no member of, as Linux does
// at creat and chmod: otherwise anyone could make programs that run with a
// group they do not have (e.g. in a setgid directory of that group).
func clearForeignSetgid(who *auth.Identity, a *wire.Attr) {
	if who == nil || who.Super() || a.Type == wire.TypeDir || a.Mode&02000 == 0 {
		return
	}
	// A user without groups has a group of their own name.
	if !who.InGroup(a.Group) && !(len(who.Groups) == 0 && a.Group == who.User) {
		a.Mode &^= 02000
	}
}

// lockEmptyDir locks directory ino exclusively (creators in it hold it
// shared) and checks that it is empty, before it is removed or replaced
// (p names it in messages).
func (n *Namenode) lockEmptyDir(tx *Txn, ino uint64, p string) error {
	if err := n.lockInode(tx, ino); err != nil {
		return err
	}
	if len(n.ns.list(tx, ino)) != 0 {
		return fail(wire.ErrCodeNotEmpty, "%s: directory not empty", p)
	}
	return nil
}

func (n *Namenode) unlink(tx *Txn, who *auth.Identity, p string, dir bool) error {
	parent, name, err := n.ns.resolveParent(tx, who, p)
	if err != nil {
		return err
	}
	if err := n.ns.slashOnNonDir(tx, p, parent, name); err != nil {
		return err
	}
	return n.unlinkIn(tx, who, parent, name, p, dir)
}

// unlinkIn removes the entry name of directory parent (p names it in
// messages).
func (n *Namenode) unlinkIn(tx *Txn, who *auth.Identity, parent uint64, name, p string, dir bool) error {
	if err := n.needDir(tx, who, parent, p); err != nil {
		return err
	}
	if err := n.checkSticky(tx, who, parent, n.ns.entry(tx, parent, name), p); err != nil {
		return err
	}
	if err := n.lockEntry(tx, parent, name); err != nil {
		return err
	}
	ino := n.ns.entry(tx, parent, name)
	if ino == 0 {
		return fail(wire.ErrCodeNotFound, "%s: no such file or directory", p)
	}
	a := n.ns.attr(tx, ino)
	if a == nil {
		return fail(wire.ErrCodeNotFound, "%s: no such file or directory", p)
	}

	if a.Type == wire.TypeDir {
		if !dir {
			return fail(wire.ErrCodeIsDir, "%s: is a directory", p)
		}
		if err := n.lockEmptyDir(tx, ino, p); err != nil {
			return err
		}
	} else if dir {
		return fail(wire.ErrCodeNotDir, "%s: not a directory", p)
	}
	if err := n.dropLink(tx, ino); err != nil {
		return err
	}
	n.ns.setEntry(tx, parent, name, 0)
	return nil
}

// dropLink counts one name of ino less (a directory has none left) and
// touches its ctime; the caller removes or replaces the entry.
func (n *Namenode) dropLink(tx *Txn, ino uint64) error {
	ma, err := n.ns.mutAttr(tx, ino)
	if err != nil {
		return err
	}
	if ma.Type == wire.TypeDir {
		ma.Nlink = 0
	} else {
		ma.Nlink--
	}
	ma.Ctime = time.Now().UnixNano()
	return nil
}

func (n *Namenode) link(tx *Txn, who *auth.Identity, existing, newPath string) (*wire.Response, error) {
	ino, err := n.ns.resolve(tx, who, existing, false)
	if err != nil {
		return nil, err
	}
	parent, name, err := n.ns.resolveParent(tx, who, newPath)
	if err != nil {
		return nil, err
	}
	return n.linkIn(tx, who, ino, parent, name, existing, newPath)
}

// linkIn makes name in directory parent another name of inode ino.
func (n *Namenode) linkIn(tx *Txn, who *auth.Identity, ino, parent uint64, name, existing, newPath string) (*wire.Response, error) {
	a := n.ns.attr(tx, ino)
	if a == nil {
		return nil, fail(wire.ErrCodeNotFound, "%s: no such file", existing)
	}
	if a.Type == wire.TypeDir {
		return nil, fail(wire.ErrCodePerm, "%s: hard links to directories are not allowed", existing)
	}
	if err := n.claimEntry(tx, who, parent, name, newPath); err != nil {
		return nil, err
	}
	a, err := n.ns.mutAttr(tx, ino)
	if err != nil {
		return nil, err
	}
	a.Nlink++
	a.Ctime = time.Now().UnixNano()
	n.ns.setEntry(tx, parent, name, ino)
	return &wire.Response{Attr: cp(a)}, nil
}

func (n *Namenode) rename(tx *Txn, who *auth.Identity, from, to string, noReplace bool) error {
	sp, sname, err := n.ns.resolveParent(tx, who, from)
	if err != nil {
		return err
	}
	dp, dname, err := n.ns.resolveParent(tx, who, to)
	if err != nil {
		return err
	}
	if err := n.ns.slashOnNonDir(tx, from, sp, sname); err != nil {
		return err
	}
	if err := n.ns.slashOnNonDir(tx, to, sp, sname); err != nil {
		return err // moving a non-directory to a name with a slash
	}
	return n.renameIn(tx, who, sp, sname, dp, dname, from, to, noReplace)
}

// renameIn moves entry sname of directory sp to dname in dp, replacing
// what is there unless noReplace.
func (n *Namenode) renameIn(tx *Txn, who *auth.Identity, sp uint64, sname string, dp uint64, dname, from, to string, noReplace bool) error {
	if err := n.needDir(tx, who, sp, from); err != nil {
		return err
	}
	if err := n.needDir(tx, who, dp, to); err != nil {
		return err
	}
	// Checked before any lock is taken (a refused request locks nothing).
	if err := n.checkSticky(tx, who, sp, n.ns.entry(tx, sp, sname), from); err != nil {
		return err
	}
	if dst := n.ns.entry(tx, dp, dname); dst != 0 && dst != n.ns.entry(tx, sp, sname) {
		if err := n.checkSticky(tx, who, dp, dst, to); err != nil {
			return err
		}
	}
	if err := n.lockEntry(tx, sp, sname); err != nil {
		return err
	}
	if err := n.lockEntry(tx, dp, dname); err != nil {
		return err
	}
	if err := n.lockShared(tx, dp); err != nil {
		return err
	}
	src := n.ns.entry(tx, sp, sname)
	if src == 0 {
		return fail(wire.ErrCodeNotFound, "%s: no such file or directory", from)
	}

	sa := n.ns.attr(tx, src)
	if sp == dp && sname == dname {
		return nil
	}
	if sa.Type == wire.TypeDir {
		// Moving a directory: take the namespace-wide move lock so two
		// concurrent moves cannot form a cycle, then check for one.
		if n.renameLock != nil && n.renameLock != tx {
			return errConflict
		}
		n.renameLock = tx
		for d := dp; ; d = n.ns.parentOf(tx, d) {
			if d == src {
				return fail(wire.ErrCodeInvalid, "cannot move %s into itself (%s)", from, to)
			}
			if d == rootIno {
				break
			}
		}
		if err := n.lockInode(tx, src); err != nil {
			return err
		}
	}
	if err := n.admitEntry(tx, dp); err != nil {
		return err
	}
	if dst := n.ns.entry(tx, dp, dname); dst != 0 {
		if noReplace {
			return fail(wire.ErrCodeExists, "%s: file exists", to)
		}
		da := n.ns.attr(tx, dst)
		switch {
		case da.Type == wire.TypeDir && sa.Type != wire.TypeDir:
			return fail(wire.ErrCodeIsDir, "cannot overwrite directory %s with non-directory %s", to, from)
		case da.Type != wire.TypeDir && sa.Type == wire.TypeDir:
			return fail(wire.ErrCodeNotDir, "cannot overwrite non-directory %s with directory %s", to, from)
		case da.Type == wire.TypeDir:
			if err := n.lockEmptyDir(tx, dst, to); err != nil {
				return err
			}
		}
		if err := n.dropLink(tx, dst); err != nil {
			return err
		}
	}
	n.ns.setEntry(tx, sp, sname, 0)
	n.ns.setEntry(tx, dp, dname, src)
	if sa.Type == wire.TypeDir {
		tx.setParent(src, dp)
	}
	return nil
}
