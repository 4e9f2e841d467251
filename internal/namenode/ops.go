package namenode

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/plasmafs/plasma/internal/auth"
	"github.com/plasmafs/plasma/internal/wire"
)

// opFlags are the checks the dispatcher makes before an operation runs,
// once for all operations instead of in each.
type opFlags uint8

const (
	// opOutsideTxn: the operation concerns the connection or a whole
	// transaction (abort, keepalive); q.Txn is not looked up for it.
	opOutsideTxn opFlags = 1 << iota
	// opNeedsTxn: the operation changes metadata and must run in a
	// transaction.
	opNeedsTxn
	// opDatanode: only datanodes may ask (at a security level that
	// identifies them; at level none everybody is unidentified).
	opDatanode
	// opSuperuser: only the superuser may ask (likewise).
	opSuperuser
	// opReachIno: q.Ino, if set, must have a path from the root that the
	// caller may search (inode-addressed access is no back door).
	opReachIno
)

// opHandler runs one operation. Called with n.mu held.
type opHandler func(n *Namenode, c *conn, tx *Txn, who *auth.Identity, q *wire.Request) (*wire.Response, error)

// opSpec is an operation's entry in the dispatch table.
type opSpec struct {
	flags opFlags
	run   opHandler
}

// opTable lists every operation handle serves (commits and datanode
// registrations take other paths: the committer and registerAsync).
var opTable map[wire.Op]opSpec

func init() {
	opTable = map[wire.Op]opSpec{
		wire.OpAbort:     {opOutsideTxn, (*Namenode).opAbort},
		wire.OpKeepalive: {opOutsideTxn, (*Namenode).opKeepalive},
		wire.OpPing: {0, func(*Namenode, *conn, *Txn, *auth.Identity, *wire.Request) (*wire.Response, error) {
			return &wire.Response{}, nil
		}},
		wire.OpLookup: {0, (*Namenode).opLookup},
		wire.OpStat:   {opReachIno, (*Namenode).opStat},
		wire.OpReadDir: {opReachIno, func(n *Namenode, _ *conn, tx *Txn, who *auth.Identity, q *wire.Request) (*wire.Response, error) {
			return n.readDir(tx, who, q)
		}},
		wire.OpBlocks: {opReachIno, (*Namenode).opBlocks},
		wire.OpGlob:   {0, (*Namenode).opGlob},
		wire.OpFsStat: {0, func(n *Namenode, _ *conn, _ *Txn, _ *auth.Identity, _ *wire.Request) (*wire.Response, error) {
			return n.fsStat(), nil
		}},
		wire.OpPathOf:   {0, (*Namenode).opPathOf},
		wire.OpLeaseDir: {opOutsideTxn, (*Namenode).opLeaseDir},
		wire.OpStats:    {0, (*Namenode).opStats},
		wire.OpNodes: {0, func(n *Namenode, _ *conn, _ *Txn, _ *auth.Identity, _ *wire.Request) (*wire.Response, error) {
			return &wire.Response{Nodes: n.nodeList()}, nil
		}},
		wire.OpHeartbeat: {opDatanode, (*Namenode).opHeartbeat},
		wire.OpFsck: {opSuperuser, func(n *Namenode, c *conn, tx *Txn, _ *auth.Identity, q *wire.Request) (*wire.Response, error) {
			return n.fsckPage(tx, q)
		}},
		wire.OpCreate: {opNeedsTxn, (*Namenode).opCreate},
		wire.OpSetAttr: {opNeedsTxn | opReachIno, func(n *Namenode, _ *conn, tx *Txn, who *auth.Identity, q *wire.Request) (*wire.Response, error) {
			return n.setAttr(tx, who, q)
		}},
		wire.OpUnlink: {opNeedsTxn, (*Namenode).opUnlink},
		wire.OpRename: {opNeedsTxn, (*Namenode).opRename},
		wire.OpLink:   {opNeedsTxn, (*Namenode).opLink},
		wire.OpAllocate: {opNeedsTxn | opReachIno, func(n *Namenode, _ *conn, tx *Txn, who *auth.Identity, q *wire.Request) (*wire.Response, error) {
			return n.allocateOp(tx, who, q)
		}},
		wire.OpSetBlocks: {opNeedsTxn | opReachIno, func(n *Namenode, _ *conn, tx *Txn, who *auth.Identity, q *wire.Request) (*wire.Response, error) {
			return n.setBlocks(tx, who, q)
		}},
		wire.OpDropReplicas: {opNeedsTxn, func(n *Namenode, _ *conn, tx *Txn, _ *auth.Identity, q *wire.Request) (*wire.Response, error) {
			return nil, n.dropReplicas(tx, q.Pref)
		}},
	}
}

// handle runs one request other than commit: the checks its table entry
// asks for, then its handler. Called with n.mu held.
func (n *Namenode) handle(c *conn, q *wire.Request) (*wire.Response, error) {
	spec, ok := opTable[q.Op]
	if !ok {
		return nil, fail(wire.ErrCodeInvalid, "operation %s not supported", q.Op)
	}
	who := c.who
	if spec.flags&opOutsideTxn != 0 {
		return spec.run(n, c, nil, who, q)
	}
	var tx *Txn
	if q.Txn != 0 {
		var err error
		if tx, err = n.getTxn(c, q.Txn, q.Flags&wire.FlagBegin != 0); err != nil {
			return nil, err
		}
		if tx.committing {
			return nil, fail(wire.ErrCodeTxn, "transaction %d is committing", q.Txn)
		}
	}
	switch {
	case spec.flags&opDatanode != 0 && who != nil && who.Role != auth.RoleDatanode:
		return nil, fail(wire.ErrCodePerm, "%s: only datanodes may ask this", q.Op)
	case spec.flags&opSuperuser != 0 && who != nil && !who.Super():
		return nil, fail(wire.ErrCodePerm, "%s: only the superuser may ask this", q.Op)
	case spec.flags&opReachIno != 0 && q.Ino != 0 && !n.reachable(tx, who, q.Ino):
		return nil, denied(who, fmt.Sprintf("inode %d (no searchable path to it)", q.Ino))
	case spec.flags&opNeedsTxn != 0 && tx == nil:
		return nil, fail(wire.ErrCodeTxn, "%s needs a transaction", q.Op)
	}
	return spec.run(n, c, tx, who, q)
}

// opAbort: aborting a transaction that already ended is not an error, and
// must not begin it again.
func (n *Namenode) opAbort(c *conn, _ *Txn, _ *auth.Identity, q *wire.Request) (*wire.Response, error) {
	if tx := n.txns.get(c, q.Txn); tx != nil && !tx.committing {
		n.endTxn(tx, false)
	}
	return &wire.Response{}, nil
}

// opKeepalive: one message per connection keeps all its transactions
// alive however long their client reads without asking the namenode.
func (n *Namenode) opKeepalive(c *conn, _ *Txn, _ *auth.Identity, _ *wire.Request) (*wire.Response, error) {
	now := time.Now()
	for k, tx := range n.txns.all() {
		if k.conn == c {
			tx.lastUse = now
		}
	}
	return &wire.Response{Counters: []uint64{uint64(n.cfg.TxnTimeout), uint64(n.cfg.TicketLifetime)}}, nil
}

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

func (n *Namenode) opStat(_ *conn, tx *Txn, who *auth.Identity, q *wire.Request) (*wire.Response, error) {
	if q.Flags&wire.FlagBlocks != 0 {
		return n.openResponse(tx, who, q.Ino, fmt.Sprintf("inode %d", q.Ino))
	}
	return n.attrResponse(tx, q.Ino)
}

func (n *Namenode) opBlocks(_ *conn, tx *Txn, who *auth.Identity, q *wire.Request) (*wire.Response, error) {
	a := n.ns.attr(tx, q.Ino)
	if a != nil && !may(who, a, permRead) {
		return nil, denied(who, fmt.Sprintf("inode %d", q.Ino))
	}
	return n.openResponse(tx, who, q.Ino, fmt.Sprintf("inode %d", q.Ino))
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
	if !n.reachable(tx, who, q.Ino) {
		return nil, denied(who, fmt.Sprintf("inode %d", q.Ino))
	}
	p, err := n.pathOf(tx, q.Ino)
	if err != nil {
		return nil, err
	}
	return &wire.Response{Paths: []string{p}}, nil
}

// opStats answers the request counters, then the namenode process's CPU
// time (user + system) in ns.
func (n *Namenode) opStats(*conn, *Txn, *auth.Identity, *wire.Request) (*wire.Response, error) {
	out := []uint64{n.srv.requests.Load(), n.commits.Load(), n.cm.batches.Load()}
	for i := range n.srv.perOp {
		out = append(out, n.srv.perOp[i].Load())
	}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		out = append(out, uint64(ru.Utime.Nano()+ru.Stime.Nano()))
	}
	return &wire.Response{Counters: out}, nil
}

func (n *Namenode) opHeartbeat(c *conn, _ *Txn, _ *auth.Identity, q *wire.Request) (*wire.Response, error) {
	if q.Node == nil {
		return nil, fail(wire.ErrCodeInvalid, "heartbeat without node")
	}
	dn := n.nodes.lookup(q.Node.Identity)
	if dn == nil || dn.conn != c {
		return nil, fail(wire.ErrCodeInvalid, "heartbeat from an unregistered datanode")
	}
	dn.alive = true
	dn.lastSeen = time.Now()
	revoked := dn.revoked
	dn.revoked = nil
	return &wire.Response{Counters: revoked}, nil
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
		if !n.reachable(tx, who, q.Ino) {
			return nil, denied(who, fmt.Sprintf("inode %d", q.Ino))
		}
		if err := n.atDir(tx, who, q.Ino2, q.Path2); err != nil {
			return nil, err
		}
		return n.linkIn(tx, who, q.Ino, q.Ino2, q.Path2, fmt.Sprintf("inode %d", q.Ino), q.Path2)
	}
	return n.link(tx, who, q.Path, q.Path2)
}

func cp(a *wire.Attr) *wire.Attr { c := *a; return &c }

func (n *Namenode) attrResponse(tx *Txn, ino uint64) (*wire.Response, error) {
	a := n.ns.attr(tx, ino)
	if a == nil {
		return nil, fail(wire.ErrCodeNotFound, "inode %d: no such file or directory", ino)
	}
	if tx != nil {
		n.ns.use(tx, ino)
	}
	out := cp(a)
	out.Blocksize = n.cfg.Blocksize
	return &wire.Response{Attr: out}, nil
}

// atDir checks a request addressed by directory inode and name: the
// directory exists, who may reach and search it, and name is one valid
// file name.
func (n *Namenode) atDir(tx *Txn, who *auth.Identity, dir uint64, name string) error {
	if !n.reachable(tx, who, dir) {
		return denied(who, fmt.Sprintf("inode %d", dir))
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
			return "", fail(wire.ErrCodeNotFound, "inode %d: no such file or directory", ino)
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

// openResponse answers an open: the attributes of a file together with the
// block list of the same version (the size is that version's), so a reader
// never sees one version's length with another's blocks.
func (n *Namenode) openResponse(tx *Txn, who *auth.Identity, ino uint64, what string) (*wire.Response, error) {
	a := n.ns.attr(tx, ino)
	if a == nil {
		return nil, fail(wire.ErrCodeNotFound, "%s: no such file or directory", what)
	}
	out := cp(a)
	out.Blocksize = n.cfg.Blocksize
	if a.Type != wire.TypeFile {
		if tx != nil {
			n.ns.use(tx, ino)
		}
		return &wire.Response{Attr: out}, nil
	}
	if !may(who, a, permRead) {
		if tx != nil {
			n.ns.use(tx, ino)
		}
		// Opening a file one may only write is allowed; its blocks are not
		// handed out (Counters stays empty: no block list included).
		return &wire.Response{Attr: out}, nil
	}
	xs, size := n.ns.fileVersion(tx, ino)
	out.Size = size
	return n.ticketed(tx, &wire.Response{Attr: out, Extents: xs, Nodes: n.nodeList(), Counters: []uint64{wire.BlocksIncluded}}), nil
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
		return 0, fail(wire.ErrCodeUnavailable, "replication %d requested but only %d datanodes are alive", rep, live)
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

func (n *Namenode) createIn(tx *Txn, who *auth.Identity, q *wire.Request, parent uint64, name string) (*wire.Response, error) {
	if err := n.needDir(tx, who, parent, q.Path); err != nil {
		return nil, err
	}
	if err := n.lockShared(tx, parent); err != nil {
		return nil, err
	}
	if err := n.lockEntry(tx, parent, name); err != nil {
		return nil, err
	}
	if n.ns.entry(tx, parent, name) != 0 {
		return nil, fail(wire.ErrCodeExists, "%s: file exists", q.Path)
	}
	if err := n.admitEntry(tx, parent); err != nil {
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
	ino, err := n.newIno()
	if err != nil {
		return nil, err
	}
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
		if tx.parents == nil {
			tx.parents = map[uint64]uint64{}
		}
		tx.parents[ino] = parent
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

// dropBlocks removes blocks at index ≥ keep from ino's list in tx.
func (n *Namenode) dropBlocks(tx *Txn, ino uint64, keep uint64) {
	old := n.ns.blockList(tx, ino)
	var out []wire.Extent
	for _, x := range old {
		end := x.Index + uint64(x.Count)
		switch {
		case end <= keep:
			out = append(out, x)
		case x.Index >= keep:
			tx.freed = append(tx.freed, extentRuns([]wire.Extent{x})...)
		default:
			k := keep - x.Index
			head := wire.Extent{Index: x.Index, Count: uint32(k), CRC: x.CRC[:k], Gen: x.Gen}
			for _, r := range x.Replicas {
				head.Replicas = append(head.Replicas, r)
				tx.freed = append(tx.freed, run{node: r.Node, start: r.Start + k, count: uint64(x.Count) - k})
			}
			out = append(out, head)
		}
	}
	if tx.blocks == nil {
		tx.blocks = map[uint64][]wire.Extent{}
	}
	tx.blocks[ino] = out
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

func (n *Namenode) setAttr(tx *Txn, who *auth.Identity, q *wire.Request) (*wire.Response, error) {
	// Permissions are checked on the current attributes before the lock is
	// taken: a refused request must not leave the inode locked.
	a := n.ns.attr(tx, q.Ino)
	if a == nil {
		return nil, fail(wire.ErrCodeNotFound, "inode %d: no such file or directory", q.Ino)
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
	if q.Flags&wire.FlagSize != 0 && (q.Size < 0 || q.Size > maxFileSize(n.cfg.Blocksize)) {
		return nil, fail(wire.ErrCodeInvalid, "inode %d: bad size %d", q.Ino, q.Size)
	}
	var err error
	if a, err = n.ns.mutAttr(tx, q.Ino); err != nil {
		if err == errNotFound {
			return nil, fail(wire.ErrCodeNotFound, "inode %d: no such file or directory", q.Ino)
		}
		return nil, err
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

func (n *Namenode) isEmptyDir(tx *Txn, ino uint64) bool { return len(n.ns.list(tx, ino)) == 0 }

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
	if n.stickyDenies(tx, who, parent, n.ns.entry(tx, parent, name)) {
		return denied(who, p+" (sticky directory)")
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
		// The exclusive lock conflicts with creators holding it shared.
		if err := n.lockInode(tx, ino); err != nil {
			return err
		}
		if !n.isEmptyDir(tx, ino) {
			return fail(wire.ErrCodeNotEmpty, "%s: directory not empty", p)
		}
	} else if dir {
		return fail(wire.ErrCodeNotDir, "%s: not a directory", p)
	}
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
	n.ns.setEntry(tx, parent, name, 0)
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
	if err := n.needDir(tx, who, parent, newPath); err != nil {
		return nil, err
	}
	if err := n.lockShared(tx, parent); err != nil {
		return nil, err
	}
	if err := n.lockEntry(tx, parent, name); err != nil {
		return nil, err
	}
	if n.ns.entry(tx, parent, name) != 0 {
		return nil, fail(wire.ErrCodeExists, "%s: file exists", newPath)
	}
	if err := n.admitEntry(tx, parent); err != nil {
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
	if n.stickyDenies(tx, who, sp, n.ns.entry(tx, sp, sname)) {
		return denied(who, from+" (sticky directory)")
	}
	if dst := n.ns.entry(tx, dp, dname); dst != 0 && dst != n.ns.entry(tx, sp, sname) && n.stickyDenies(tx, who, dp, dst) {
		return denied(who, to+" (sticky directory)")
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
			if err := n.lockInode(tx, dst); err != nil {
				return err
			}
			if !n.isEmptyDir(tx, dst) {
				return fail(wire.ErrCodeNotEmpty, "%s: directory not empty", to)
			}
		}
		ma, err := n.ns.mutAttr(tx, dst)
		if err != nil {
			return err
		}
		if ma.Type == wire.TypeDir {
			ma.Nlink = 0
		} else {
			ma.Nlink--
		}
		ma.Ctime = time.Now().UnixNano()
	}
	n.ns.setEntry(tx, sp, sname, 0)
	n.ns.setEntry(tx, dp, dname, src)
	if sa.Type == wire.TypeDir {
		if tx.parents == nil {
			tx.parents = map[uint64]uint64{}
		}
		tx.parents[src] = dp
	}
	return nil
}

func (n *Namenode) allocateOp(tx *Txn, who *auth.Identity, q *wire.Request) (*wire.Response, error) {
	if q.Count == 0 || q.Count > 1<<20 {
		return nil, fail(wire.ErrCodeInvalid, "allocate: bad block count %d", q.Count)
	}
	if q.Index > maxBlockIndex {
		return nil, fail(wire.ErrCodeInvalid, "allocate: block index %d too large", q.Index)
	}
	if err := n.mayWriteFile(tx, who, q.Ino); err != nil {
		return nil, err
	}
	a, err := n.ns.mutAttr(tx, q.Ino)
	if err != nil {
		return nil, err
	}
	want := q.Count * uint64(max(a.Rep, 1))
	if lim := n.userAllocLimit(); n.txns.held(tx.user)+want > lim {
		return nil, fail(wire.ErrCodeNoSpace, "allocate: no space for user %q: it holds %d blocks in uncommitted transactions and %d more would pass its limit of %d (commit first, or raise the namenode's -user-alloc-limit)", tx.user, n.txns.held(tx.user), want, lim)
	}
	// On failure the allocator has given back whatever it took.
	xs, err := n.allocate(tx, q.Ino, q.Index, q.Count, int(a.Rep), q.Pref, newGen())
	if err != nil {
		return nil, err
	}
	n.txns.charge(tx, want)
	return &wire.Response{Extents: n.withTickets(tx, xs, true), Nodes: n.nodeList()}, nil
}

// userAllocLimit is how many blocks one user may hold in uncommitted
// transactions: the configured limit, or seven eighths of the cluster's
// blocks, so one user's transactions cannot take all the space.
func (n *Namenode) userAllocLimit() uint64 {
	if n.cfg.UserAllocLimit > 0 {
		return n.cfg.UserAllocLimit
	}
	var total uint64
	for dn := range n.nodes.all() {
		total += dn.Blocks
	}
	return total - total/8
}

// allocatedAs reports whether tx allocated blocks start..start+count-1 of
// node for file ino at file block index (so an allocated run can be
// attached to one place only: never to a second file, never twice).
func (tx *Txn) allocatedAs(node uint32, start, count, ino, index, gen uint64) bool {
	for _, r := range tx.allocated[node] {
		if r.ino == ino && r.gen == gen && r.start <= start && start+count <= r.start+r.count && index-r.index == start-r.start && index >= r.index {
			return true
		}
	}
	return false
}

// ownsRun reports whether tx allocated blocks start..start+count-1 of node.
func (tx *Txn) ownsRun(node uint32, start, count uint64) bool {
	for _, r := range tx.allocated[node] {
		if r.start <= start && start+count <= r.start+r.count {
			return true
		}
	}
	return false
}

// mayWriteFile checks, without locking, that ino is a regular file who may
// write.
func (n *Namenode) mayWriteFile(tx *Txn, who *auth.Identity, ino uint64) error {
	a := n.ns.attr(tx, ino)
	if a == nil {
		return fail(wire.ErrCodeNotFound, "inode %d: no such file", ino)
	}
	if a.Type != wire.TypeFile {
		return fail(wire.ErrCodeIsDir, "inode %d is not a regular file", ino)
	}
	if !may(who, a, permWrite) {
		return denied(who, fmt.Sprintf("write to inode %d", ino))
	}
	return nil
}

func (n *Namenode) setBlocks(tx *Txn, who *auth.Identity, q *wire.Request) (*wire.Response, error) {
	if err := n.mayWriteFile(tx, who, q.Ino); err != nil {
		return nil, err
	}
	a := n.ns.attr(tx, q.Ino)
	for i := range q.Extents {
		q.Extents[i].Tickets = nil // never stored
	}
	if q.Flags&wire.FlagSize != 0 && (q.Size < 0 || q.Size > maxFileSize(n.cfg.Blocksize)) {
		return nil, fail(wire.ErrCodeInvalid, "setblocks: inode %d: bad size %d", q.Ino, q.Size)
	}
	size := a.Size
	if q.Flags&wire.FlagSize != 0 {
		size = q.Size
	}
	bs := uint64(n.cfg.Blocksize)
	for _, x := range q.Extents {
		if x.Count == 0 || len(x.CRC) != int(x.Count) || len(x.Replicas) == 0 || len(x.Replicas) > wire.MaxReplica {
			return nil, fail(wire.ErrCodeInvalid, "setblocks: extent at index %d lacks checksums or replicas", x.Index)
		}
		if x.Index > maxBlockIndex || (x.Index+uint64(x.Count)-1)*bs >= uint64(size) {
			return nil, fail(wire.ErrCodeInvalid, "setblocks: inode %d: blocks %d-%d lie beyond the file size %d", q.Ino, x.Index, x.Index+uint64(x.Count)-1, size)
		}
		nodes := map[uint32]bool{}
		for _, r := range x.Replicas {
			if nodes[r.Node] {
				return nil, fail(wire.ErrCodeInvalid, "setblocks: blocks %d+%d have two replicas on datanode %d", x.Index, x.Count, r.Node)
			}
			nodes[r.Node] = true
			if !tx.allocatedAs(r.Node, r.Start, uint64(x.Count), q.Ino, x.Index, x.Gen) {
				return nil, fail(wire.ErrCodeInvalid, "setblocks: blocks %d+%d on datanode %d were not allocated by this transaction for inode %d blocks %d-%d", r.Start, x.Count, r.Node, q.Ino, x.Index, x.Index+uint64(x.Count)-1)
			}
		}
	}
	a, err := n.ns.mutAttr(tx, q.Ino)
	if err != nil {
		return nil, err
	}
	merged, freed := mergeBlocks(n.ns.blockList(tx, q.Ino), q.Extents)
	tx.freed = append(tx.freed, freed...)
	if tx.blocks == nil {
		tx.blocks = map[uint64][]wire.Extent{}
	}
	tx.blocks[q.Ino] = merged
	if q.Flags&wire.FlagSize != 0 {
		a.Size = q.Size
	}
	a.Seq++
	a.Mtime = time.Now().UnixNano()
	a.Ctime = a.Mtime
	return &wire.Response{}, nil
}

// maxBlockIndex bounds file block indices (and with them file sizes), so
// index arithmetic never overflows.
const maxBlockIndex = 1 << 36

func maxFileSize(bs uint32) int64 { return int64(maxBlockIndex) * int64(bs) }

func (n *Namenode) fsStat() *wire.Response {
	var total, used, alive, files, dirs uint64
	for dn := range n.nodes.all() {
		total += dn.Blocks
		used += dn.used.nused
		if dn.alive {
			alive++
		}
	}
	for _, in := range n.ns.inodes {
		switch in.attr.Type {
		case wire.TypeDir:
			dirs++
		default:
			files++
		}
	}
	return &wire.Response{Counters: []uint64{uint64(n.cfg.Blocksize), total, used, total - used, files, dirs, uint64(n.nodes.count()), alive, uint64(n.txns.count())}}
}

// dropReplicas removes, from the blocks this transaction wrote, the
// replicas on the given datanodes (identities), which could not make them
// durable. Committed replicas are never touched, and every block must keep
// at least one replica; the file is then under-replicated (fsck says so)
// but the commit can go ahead with the data that is safe.
func (n *Namenode) dropReplicas(tx *Txn, identities []string) error {
	dead := map[uint32]bool{}
	for _, id := range identities {
		if dn := n.nodes.lookup(id); dn != nil {
			dead[dn.ID] = true
		}
	}
	for ino, xs := range tx.blocks {
		var out []wire.Extent
		for _, x := range xs {
			// Committed blocks may share an extent with new ones; decide
			// block by block where an extent is only partly this
			// transaction's.
			for _, piece := range splitForDrop(tx, x, dead) {
				keep := piece.Replicas[:0:0]
				for _, r := range piece.Replicas {
					if dead[r.Node] && tx.ownsRun(r.Node, r.Start, uint64(piece.Count)) {
						continue
					}
					keep = append(keep, r)
				}
				if len(keep) == 0 {
					return fail(wire.ErrCodeUnavailable, "inode %d: blocks %d-%d have no replica left on a live datanode", ino, piece.Index, piece.Index+uint64(piece.Count)-1)
				}
				piece.Replicas = keep
				out = appendExtent(out, piece)
			}
		}
		tx.blocks[ino] = out
	}
	return nil
}

// splitForDrop returns x whole, or as single blocks when a replica on a
// dead datanode is only partly owned by tx.
func splitForDrop(tx *Txn, x wire.Extent, dead map[uint32]bool) []wire.Extent {
	whole := true
	for _, r := range x.Replicas {
		if dead[r.Node] && !tx.ownsRun(r.Node, r.Start, uint64(x.Count)) {
			whole = false
		}
	}
	if whole || x.Count == 1 {
		return []wire.Extent{x}
	}
	out := make([]wire.Extent, x.Count)
	for k := uint64(0); k < uint64(x.Count); k++ {
		p := wire.Extent{Index: x.Index + k, Count: 1, CRC: []uint32{x.CRC[k]}, Gen: x.Gen}
		for _, r := range x.Replicas {
			p.Replicas = append(p.Replicas, wire.Run{Node: r.Node, Start: r.Start + k})
		}
		out[k] = p
	}
	return out
}
