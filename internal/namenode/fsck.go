package namenode

import (
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/plasmafs/plasma/internal/meta"
	"github.com/plasmafs/plasma/internal/wire"
)

// fsck checks the committed metadata in pages, so the namenode lock is held
// for one bounded page at a time and never for the whole scan, however
// many files there are and however large they are.
//
// A scan belongs to a transaction (whose tickets let the client verify the
// blocks it is sent). Each OpFsck request (Ino: the scan's token, 0 to
// begin) does one page of work and answers with the page's problems and
// block lists (Files; a file's block list may be split over pages) and
// Counters [token, done, files begun in this page, unsettled].
//
// A pass probes every inode number in order. For each inode it records
// what the global checks need (type, link count, parent, in use, and the
// block runs of files); for each directory it goes through a sorted copy of
// its entries, counting every inode's names, and sends the block list of
// each file it names (once per file) with the checks that hold at one
// instant (checksums, replicas, datanodes, blocks marked used).
//
// The global checks (link counts, reachability from /, directory parents,
// blocks shared between files) need the whole namespace, which commits
// change between pages. So every commit applied during a pass names the
// inodes it touches (fsckNote, from applyCommit), and a global problem is
// reported only if nothing it depends on was touched during the pass: an
// inode's names change only by commits naming it, a directory's
// reachability only by commits naming a directory on its path to /, a
// file's block list only by commits naming the file. Problems that depend
// on touched inodes are checked again in another pass (up to fsckPasses);
// those still changing then are counted as unsettled, not reported.

// checker is fsck: paged scans of the committed namespace (ns) and the
// datanode registry (nodes), each scan belonging to a transaction (txns).
//
// Lock discipline: no mutex of its own; guarded by Namenode.mu (mu here),
// which page holds except while it evaluates the end of a pass, over the
// scan's own records only. Commits tell it what they touch (note) under
// the same lock.
type checker struct {
	mu        *sync.Mutex
	ns        *namespace
	nodes     *nodeRegistry
	txns      *txnTable
	inoNext   *uint64 // the namenode's next inode number: the end of a pass
	blocksize int64
	timeout   time.Duration // a scan unused this long is dropped
	log       *slog.Logger

	scans   map[uint64]*fsckScan
	scanSeq uint64
}

// fsckPageWork is the inode probes and entries per page (a variable for
// tests, which make pages small).
var fsckPageWork = 20000

const (
	fsckPageBlocks = 64 << 10 // blocks of block lists per page
	fsckPageBytes  = 4 << 20  // bytes of block lists, and of problems, per page
	fsckMaxScans   = 4        // scans at a time (each holds memory)
	fsckPasses     = 4
)

type fsckScan struct {
	key     txnKey
	token   uint64
	pass    int
	next    uint64 // next inode number to probe
	end     uint64 // first inode number not probed in this pass
	dir     *fsckDir
	file    *fsckFile
	lastUse time.Time

	recs    map[uint64]*fsckIno
	multi   map[uint64][]uint64 // inode → further directories naming it
	runs    []fsckRun           // pass 1: every file's; later: pending files'
	touched map[uint64]bool     // by commits during this pass
	pending map[uint64]bool     // suspects of the previous pass
	names   map[uint64]dirName  // directory → where it was seen named (paths)
	emitted map[uint64]bool     // files with several names already sent

	problems  []string // found, not yet sent
	probBytes int
	unsettled int
	done      bool
}

type fsckIno struct {
	seen   bool // probed in this pass
	typ    wire.FileType
	inUse  bool
	nlink  uint32
	parent uint64 // directories
	names  uint32 // entries naming it
	via    uint64 // the first directory seen naming it
}

type fsckRun struct {
	node         uint32
	start, count uint64
	ino, index   uint64
}

type dirName struct {
	parent uint64
	name   string
}

type fsckDir struct {
	ino  uint64
	path string
	ents []dirEnt // sorted by name: the directory when it was probed
	pos  int
}

type dirEnt struct {
	name string
	ino  uint64
}

type fsckFile struct {
	ino  uint64
	path string
	ext  int    // next extent to send
	off  uint32 // ... from this block of it
}

// page does the work of one OpFsck request (the caller adds the datanodes
// and tickets). Called with ck.mu held; it releases the lock while it evaluates the end of a pass (which needs only the
// scan's own records).
func (ck *checker) page(tx *Txn, q *wire.Request) (*wire.Response, error) {
	if tx == nil {
		return nil, fail(wire.ErrCodeTxn, "fsck runs in a transaction (for its datanode tickets)")
	}
	now := time.Now()
	var s *fsckScan
	if q.Ino == 0 {
		for tok, o := range ck.scans {
			if ck.txns.get(o.key.conn, o.key.id) == nil || now.Sub(o.lastUse) > ck.timeout || o.key == tx.key {
				delete(ck.scans, tok)
			}
		}
		if len(ck.scans) >= fsckMaxScans {
			return nil, fail(wire.ErrCodeUnavailable, "%d fsck scans are running; try again later", len(ck.scans))
		}
		if ck.scans == nil {
			ck.scans = map[uint64]*fsckScan{}
		}
		ck.scanSeq++
		s = &fsckScan{key: tx.key, token: ck.scanSeq, names: map[uint64]dirName{}, emitted: map[uint64]bool{}}
		ck.scans[s.token] = s
		ck.beginPass(s, 1, nil)
	} else if s = ck.scans[q.Ino]; s == nil || s.key != tx.key {
		return nil, fail(wire.ErrCodeInvalid, "fsck scan %d is not running in this transaction", q.Ino)
	}
	s.lastUse = now
	resp := &wire.Response{}
	files := uint64(0)
	blocks, size := 0, 0
	for work := 0; work < fsckPageWork && !s.done && s.probBytes < fsckPageBytes; {
		switch {
		case s.file != nil:
			if blocks >= fsckPageBlocks || size >= fsckPageBytes {
				work = fsckPageWork // the answer is full
				continue
			}
			b, x, sz := ck.sendFile(s, resp, fsckPageBlocks-blocks, fsckPageBytes-size)
			blocks += b
			size += sz
			work += b/64 + x + 1
		case s.dir != nil:
			work += ck.entries(s, resp, &files, fsckPageWork-work)
		case s.next < s.end:
			work += ck.probe(s)
		default:
			// End of a pass: evaluate without the lock.
			touched := s.touched
			s.touched = map[uint64]bool{}
			issues := func() []fsckIssue {
				ck.mu.Unlock()
				defer ck.mu.Lock() // also if it panics: the caller unlocks
				return s.evaluate(touched)
			}()
			if !ck.txns.open(tx) || ck.scans[s.token] != s {
				delete(ck.scans, s.token)
				return nil, fail(wire.ErrCodeTxn, "transaction %d ended during fsck, or its scan expired", tx.key.id)
			}
			ck.settle(s, issues)
			work = fsckPageWork
		}
	}
	// Problems, as many as fit (the end of a pass may find many).
	sent := 0
	for _, p := range s.problems {
		if sent > 0 && sent+len(p) > fsckPageBytes {
			break
		}
		resp.Problems = append(resp.Problems, p)
		sent += len(p)
	}
	s.problems = s.problems[len(resp.Problems):]
	s.probBytes -= sent
	done := uint64(0)
	if s.done && len(s.problems) == 0 {
		done = 1
		delete(ck.scans, s.token)
	}
	resp.Counters = []uint64{s.token, done, files, uint64(s.unsettled)}
	return resp, nil
}

// fsckPage answers one OpFsck request: a page of the scan, with the
// datanodes and the tickets that let the client verify the blocks listed.
// Called with n.mu held.
func (n *Namenode) fsckPage(tx *Txn, q *wire.Request) (*wire.Response, error) {
	resp, err := n.fsck.page(tx, q)
	if err != nil {
		return nil, err
	}
	resp.Nodes = n.nodeList()
	return n.ticketed(tx, resp), nil
}

// note tells the running scans which inodes a commit touches. Called by
// applyCommit, with ck.mu held, before it changes anything.
func (ck *checker) note(c *meta.Change) {
	if len(ck.scans) == 0 {
		return
	}
	touch := func(ino uint64) {
		for _, s := range ck.scans {
			s.touched[ino] = true
		}
	}
	named := func(parent uint64, name string) {
		if p := ck.ns.inodes[parent]; p != nil {
			if old, ok := p.entries[name]; ok {
				touch(old)
			}
		}
	}
	for _, a := range c.PutInodes {
		touch(a.Ino)
	}
	for _, ino := range c.DelInodes {
		touch(ino)
	}
	for _, k := range c.DelEntries {
		touch(k.Parent)
		named(k.Parent, k.Name)
	}
	for _, e := range c.PutEntries {
		touch(e.Parent)
		touch(e.Ino)
		named(e.Parent, e.Name)
	}
	for ino := range c.Blocks {
		touch(ino)
	}
}

func (ck *checker) beginPass(s *fsckScan, pass int, pending map[uint64]bool) {
	s.pass = pass
	s.next, s.end = 1, *ck.inoNext
	s.dir, s.file = nil, nil
	s.recs = map[uint64]*fsckIno{}
	s.multi = map[uint64][]uint64{}
	s.runs = nil
	s.touched = map[uint64]bool{}
	s.pending = pending
}

// report records a problem to send.
func (s *fsckScan) report(p string) {
	s.problems = append(s.problems, p)
	s.probBytes += len(p)
}

func (s *fsckScan) rec(ino uint64) *fsckIno {
	r := s.recs[ino]
	if r == nil {
		r = &fsckIno{}
		s.recs[ino] = r
	}
	return r
}

// fsckProbe records inode s.next and returns the work done.
func (ck *checker) probe(s *fsckScan) int {
	ino := s.next
	s.next++
	in := ck.ns.inodes[ino]
	if in == nil {
		return 1
	}
	r := s.rec(ino)
	r.seen, r.typ, r.nlink, r.inUse = true, in.attr.Type, in.attr.Nlink, in.users > 0
	work := 1
	switch in.attr.Type {
	case wire.TypeDir:
		r.parent = in.parent
		if ino == rootIno {
			r.parent = rootIno
		}
		d := &fsckDir{ino: ino, ents: make([]dirEnt, 0, len(in.entries))}
		for name, child := range in.entries {
			d.ents = append(d.ents, dirEnt{name, child})
		}
		sort.Slice(d.ents, func(i, j int) bool { return d.ents[i].name < d.ents[j].name })
		if s.pass == 1 {
			d.path = ck.path(s, ino)
		}
		s.dir = d
		work += len(d.ents) / 8
	case wire.TypeFile:
		if s.pass == 1 || s.pending[ino] {
			for _, x := range in.blocks {
				for _, rp := range x.Replicas {
					s.runs = append(s.runs, fsckRun{node: rp.Node, start: rp.Start, count: uint64(x.Count), ino: ino, index: x.Index})
				}
			}
			work += len(in.blocks)
		}
	}
	return work
}

// fsckEntries goes through entries of the current directory and returns
// the work done; it stops early to send a file's block list.
func (ck *checker) entries(s *fsckScan, resp *wire.Response, files *uint64, budget int) int {
	d := s.dir
	work := 0
	for d.pos < len(d.ents) && work < budget {
		e := d.ents[d.pos]
		d.pos++
		work++
		r := s.rec(e.ino)
		r.names++
		if r.via == 0 {
			r.via = d.ino
		} else {
			s.multi[e.ino] = append(s.multi[e.ino], d.ino)
		}
		if s.pass != 1 {
			continue
		}
		p := ck.ns.inodes[d.ino]
		if p == nil || p.entries[e.name] != e.ino {
			continue // changed since the directory was probed
		}
		cp := joinPath(d.path, e.name)
		child := ck.ns.inodes[e.ino]
		if child == nil {
			s.report(fmt.Sprintf("%s: entry refers to missing inode %d", cp, e.ino))
			continue
		}
		switch child.attr.Type {
		case wire.TypeDir:
			s.names[e.ino] = dirName{d.ino, e.name}
		case wire.TypeFile:
			if child.attr.Nlink > 1 {
				if s.emitted[e.ino] {
					continue
				}
				s.emitted[e.ino] = true
			}
			*files++
			s.file = &fsckFile{ino: e.ino, path: cp}
			return work
		}
	}
	if d.pos >= len(d.ents) {
		s.dir = nil
	}
	return work
}

func joinPath(dir, name string) string {
	if dir == "/" {
		return "/" + name
	}
	return dir + "/" + name
}

// fsckSendFile adds (part of) the current file's block list to resp,
// with the checks that hold at this instant, and returns the blocks and
// extents added and their size in the answer (roughly).
func (ck *checker) sendFile(s *fsckScan, resp *wire.Response, maxBlocks, maxBytes int) (int, int, int) {
	f := s.file
	in := ck.ns.inodes[f.ino]
	if in == nil || in.attr.Type != wire.TypeFile {
		s.file = nil // deleted meanwhile
		return 0, 0, 0
	}
	bs := ck.blocksize
	nblocks := uint64((in.attr.Size + bs - 1) / bs)
	fb := wire.FileBlocks{Path: f.path, Size: in.attr.Size, Rep: in.attr.Rep}
	blocks, size := 0, len(f.path)+16
	for f.ext < len(in.blocks) && blocks < maxBlocks && size < maxBytes {
		x := in.blocks[f.ext]
		if f.off >= x.Count {
			f.ext, f.off = f.ext+1, 0
			continue
		}
		if f.off == 0 {
			ck.extent(s, f.path, in, x, nblocks)
		}
		// A part of at most the room left.
		k := min(x.Count-f.off, uint32(maxBlocks-blocks), uint32(max(1, (maxBytes-size)/4)))
		part := wire.Extent{Index: x.Index + uint64(f.off), Count: k}
		for _, r := range x.Replicas {
			part.Replicas = append(part.Replicas, wire.Run{Node: r.Node, Start: r.Start + uint64(f.off)})
		}
		if len(x.CRC) == int(x.Count) {
			part.CRC = x.CRC[f.off : f.off+k]
		}
		fb.Extents = append(fb.Extents, part)
		blocks += int(k)
		size += 16 + 4*int(k) + len(part.Replicas)*(16+ticketSize)
		f.off += k
		if f.off >= x.Count {
			f.ext, f.off = f.ext+1, 0
		}
	}
	if len(fb.Extents) > 0 || f.ext == 0 {
		resp.Files = append(resp.Files, fb)
	}
	if f.ext >= len(in.blocks) {
		s.file = nil
	}
	return blocks, len(fb.Extents), size
}

// ticketSize bounds the size of one sealed ticket in an answer.
const ticketSize = 128

// fsckExtent checks one extent of a file against the file and the
// datanodes.
func (ck *checker) extent(s *fsckScan, path string, in *inode, x wire.Extent, nblocks uint64) {
	last := x.Index + uint64(x.Count) - 1
	if len(x.CRC) != int(x.Count) {
		s.report(fmt.Sprintf("%s: blocks %d-%d have %d checksums", path, x.Index, last, len(x.CRC)))
	}
	if x.Index+uint64(x.Count) > nblocks {
		s.report(fmt.Sprintf("%s: block %d lies beyond the file size %d", path, last, in.attr.Size))
	}
	if len(x.Replicas) < int(in.attr.Rep) {
		s.report(fmt.Sprintf("%s: blocks %d-%d have %d of %d replicas", path, x.Index, last, len(x.Replicas), in.attr.Rep))
	}
	for _, r := range x.Replicas {
		dn := ck.nodes.get(r.Node)
		if dn == nil {
			s.report(fmt.Sprintf("%s: blocks %d-%d are on unknown datanode %d", path, x.Index, last, r.Node))
			continue
		}
		if r.Start+uint64(x.Count) > dn.Blocks {
			s.report(fmt.Sprintf("%s: blocks %d-%d lie beyond the end of datanode %s", path, x.Index, last, dn.Identity))
			continue
		}
		for k := uint64(0); k < uint64(x.Count); k++ {
			if !dn.used.isUsedSafe(r.Start + k) {
				s.report(fmt.Sprintf("%s: block %d (datanode %s block %d) is marked free", path, x.Index+k, dn.Identity, r.Start+k))
			}
		}
	}
}

// fsckPath returns the path of directory d as far as the scan knows it,
// looking up names it has not seen yet (directories named by a directory
// with a higher inode number).
func (ck *checker) path(s *fsckScan, d uint64) string {
	var parts []string
	for cur := d; cur != rootIno; {
		nm, ok := s.names[cur]
		if !ok {
			in := ck.ns.inodes[cur]
			if in == nil {
				return fmt.Sprintf("<inode %d>", d)
			}
			p := ck.ns.inodes[in.parent]
			if p != nil {
				for name, ino := range p.entries {
					if ino == cur {
						nm, ok = dirName{in.parent, name}, true
						break
					}
				}
			}
			if !ok {
				return fmt.Sprintf("<unreachable directory inode %d>", d)
			}
			s.names[cur] = nm
		}
		parts = append(parts, nm.name)
		cur = nm.parent
		if len(parts) > 1<<16 {
			return fmt.Sprintf("<directory inode %d in a cycle>", d)
		}
	}
	for i, j := 0, len(parts)-1; i < j; i, j = i+1, j-1 {
		parts[i], parts[j] = parts[j], parts[i]
	}
	return "/" + strings.Join(parts, "/")
}

// A global problem found at the end of a pass, with the inodes it
// depends on.
type fsckIssue struct {
	kind    int
	ino     uint64 // the inode it is about
	other   uint64 // shared blocks: the other file
	r       fsckIno
	x, y    fsckRun // shared blocks: the two runs
	deps    []uint64
	settled bool // nothing in deps was touched during the pass
}

const (
	issueUnreachable = iota
	issueLinks
	issueDirNames
	issueDirParent
	issueShared
)

// evaluate finds the global problems of a finished pass. It reads only the
// scan's records (touched is the pass's set of touched inodes), not the
// namenode's state, and runs without the lock.
func (s *fsckScan) evaluate(touched map[uint64]bool) []fsckIssue {
	type reach struct{ ok, clean bool }
	memo := map[uint64]reach{rootIno: {true, true}}
	namedBy := func(ino, p uint64) bool {
		r := s.recs[ino]
		if r.via == p {
			return true
		}
		for _, q := range s.multi[ino] {
			if q == p {
				return true
			}
		}
		return false
	}
	// dir: is directory d reachable from / by parent pointers, each backed
	// by an entry; clean: no directory on the way was touched.
	dir := func(d uint64) reach {
		var path []uint64
		on := map[uint64]bool{}
		cur := d
		var res reach
		for {
			if m, ok := memo[cur]; ok {
				res = m
				break
			}
			r := s.recs[cur]
			if r == nil || !r.seen || r.typ != wire.TypeDir || on[cur] || !namedBy(cur, r.parent) {
				res = reach{false, !touched[cur]}
				if on[cur] { // a cycle: every member's fate is the same
					res.clean = true
					for _, p := range path {
						res.clean = res.clean && !touched[p]
					}
				}
				break
			}
			on[cur] = true
			path = append(path, cur)
			cur = r.parent
		}
		for i := len(path) - 1; i >= 0; i-- {
			res.clean = res.clean && !touched[path[i]]
			memo[path[i]] = res
		}
		if m, ok := memo[d]; ok {
			return m
		}
		return res
	}
	var out []fsckIssue
	add := func(is fsckIssue) {
		is.settled = true
		for _, d := range is.deps {
			if touched[d] {
				is.settled = false
			}
		}
		out = append(out, is)
	}
	for ino, r := range s.recs {
		if !r.seen || r.inUse || ino == rootIno {
			continue
		}
		if s.pass > 1 && !s.pending[ino] {
			continue
		}
		if r.typ == wire.TypeDir {
			switch {
			case r.names == 0:
				add(fsckIssue{kind: issueUnreachable, ino: ino, r: *r, deps: []uint64{ino}})
				continue
			case r.names > 1:
				add(fsckIssue{kind: issueDirNames, ino: ino, r: *r, deps: []uint64{ino}})
			case !namedBy(ino, r.parent):
				add(fsckIssue{kind: issueDirParent, ino: ino, r: *r, deps: []uint64{ino}})
			}
			if res := dir(ino); !res.ok {
				is := fsckIssue{kind: issueUnreachable, ino: ino, r: *r}
				is.settled = res.clean
				out = append(out, is)
			}
			continue
		}
		if r.names != r.nlink {
			add(fsckIssue{kind: issueLinks, ino: ino, r: *r, deps: []uint64{ino}})
		}
		ok, clean := false, !touched[ino]
		for _, p := range append([]uint64{r.via}, s.multi[ino]...) {
			if p == 0 {
				continue
			}
			if res := dir(p); res.ok {
				ok, clean = true, !touched[ino] && res.clean
				break
			} else {
				clean = clean && res.clean
			}
		}
		if !ok {
			is := fsckIssue{kind: issueUnreachable, ino: ino, r: *r}
			is.settled = clean
			out = append(out, is)
		}
	}
	// Blocks shared between files: overlapping runs on one datanode.
	runs := s.runs
	sort.Slice(runs, func(i, j int) bool {
		if runs[i].node != runs[j].node {
			return runs[i].node < runs[j].node
		}
		return runs[i].start < runs[j].start
	})
	far := 0 // the run on this node reaching furthest so far
	for i := 1; i < len(runs); i++ {
		a, b := runs[far], runs[i]
		if a.node != b.node {
			far = i
			continue
		}
		if b.start < a.start+a.count && (s.pass == 1 || s.pending[a.ino] || s.pending[b.ino]) {
			add(fsckIssue{kind: issueShared, ino: b.ino, other: a.ino, x: b, y: a, deps: []uint64{a.ino, b.ino}})
		}
		if b.start+b.count > a.start+a.count {
			far = i
		}
	}
	return out
}

// fsckSettle reports the settled problems of a finished pass and begins
// another pass for the others, or ends the scan. Called with ck.mu held.
func (ck *checker) settle(s *fsckScan, issues []fsckIssue) {
	pending := map[uint64]bool{}
	for _, is := range issues {
		if !is.settled {
			pending[is.ino] = true
			if is.other != 0 {
				pending[is.other] = true
			}
			continue
		}
		s.report(ck.message(s, is))
	}
	if len(pending) > 0 && s.pass < fsckPasses {
		ck.beginPass(s, s.pass+1, pending)
		return
	}
	if len(pending) > 0 {
		ck.log.Info("fsck: inodes changed during every pass were not checked", "inodes", len(pending))
	}
	s.unsettled = len(pending)
	s.done = true
}

// fsckMessage renders a problem, naming paths as they are now.
func (ck *checker) message(s *fsckScan, is fsckIssue) string {
	switch is.kind {
	case issueUnreachable:
		return fmt.Sprintf("inode %d is not reachable from /", is.ino)
	case issueLinks:
		return fmt.Sprintf("%s: link count %d but %d names", ck.filePath(s, is.ino, is.r.via), is.r.nlink, is.r.names)
	case issueDirNames:
		return fmt.Sprintf("%s: directory inode %d has %d names", ck.path(s, is.ino), is.ino, is.r.names)
	case issueDirParent:
		return fmt.Sprintf("%s: directory inode %d records parent %d, which has no entry for it", ck.filePath(s, is.ino, is.r.via), is.ino, is.r.parent)
	case issueShared:
		x, y := is.x, is.y
		from := max(x.start, y.start)
		dn := fmt.Sprint(x.node)
		if d := ck.nodes.get(x.node); d != nil {
			dn = d.Identity
		}
		return fmt.Sprintf("%s: block %d shares datanode %s block %d with %s block %d",
			ck.filePath(s, x.ino, s.recs[x.ino].via), x.index+(from-x.start), dn, from, ck.filePath(s, y.ino, s.recs[y.ino].via), y.index+(from-y.start))
	}
	return fmt.Sprintf("inode %d: problem %d", is.ino, is.kind)
}

// fsckFilePath names inode ino, which directory dir names.
func (ck *checker) filePath(s *fsckScan, ino, dir uint64) string {
	if p := ck.ns.inodes[dir]; p != nil {
		for name, c := range p.entries {
			if c == ino {
				return joinPath(ck.path(s, dir), name)
			}
		}
	}
	return fmt.Sprintf("<inode %d>", ino)
}
