package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/plasmafs/plasma/internal/auth"
	"github.com/plasmafs/plasma/internal/wire"
)

// File is an open regular file within a transaction. It implements
// io.Reader, io.ReaderAt, io.Writer, io.WriterAt, io.Seeker and
// io.WriterTo. Writes are buffered in whole blocks and sent to the
// datanodes when enough have accumulated, on Flush, Close or Commit; they
// become visible to others when the transaction commits. Blocks are never
// overwritten in place: a write goes to newly allocated blocks, so readers
// of the previous version are unaffected.
//
// A File reads exactly one committed version (plus its own transaction's
// writes): the size and the block list come from the namenode together.
// ReadAt may be called from several goroutines at once; the other methods
// are serialised.
//
// A File uses the context it was opened with for its io methods.
type File struct {
	tx   *Txn
	ctx  context.Context
	path string
	ino  uint64
	bs   int

	mu        sync.Mutex // guards everything below
	size      int64
	pos       int64
	xs        []wire.Extent
	loaded    bool
	refreshAt time.Time // reload the block list (fresh tickets) after this
	dirty     map[uint64][]byte
	// kept[idx]: how many bytes at the start of dirty block idx are still
	// the committed version's (written blocks: from their first write on),
	// so a flush may extend that block in place (extend.go).
	kept map[uint64]int
	// unloaded[idx]: dirty block idx was begun past the end of the file
	// without reading the committed bytes before (an append that may extend
	// the block in place needs none); they are fetched from there if they
	// are needed after all (prefix.go).
	unloaded map[uint64]prefixSource
	resize   bool // size changed without data (truncate/extend) and not sent yet
	closed   bool
	topology Topology // how writes reach the replicas (topology.go)

	// One flush runs in the background while the next blocks fill up.
	inflight         map[uint64][]byte
	inflightUnloaded map[uint64]prefixSource
	inflightErr      chan error
	failed           error // a background flush failed: the file is unusable

	cacheIdx uint64 // last block read, for small sequential reads
	cache    []byte

	// Read-ahead of a sequential reader (readahead.go).
	seqEnd  int64 // where the last read ended
	seqRun  int   // reads in a row that began where the one before ended
	ahead   map[uint64]*prefetched
	aheadWG sync.WaitGroup

	// FlushBlocks is how many dirty blocks are buffered before they are
	// written out (default 64).
	FlushBlocks int
}

// Open opens an existing regular file for reading and writing. Its size
// and block list are those of one committed version.
func (tx *Txn) Open(ctx context.Context, path string) (*File, error) {
	r, err := tx.call(ctx, &wire.Request{Op: wire.OpLookup, Path: path, Flags: wire.FlagBlocks})
	if err != nil {
		return nil, err
	}
	return tx.openResp(ctx, path, r)
}

// OpenInode opens the regular file with inode number ino.
func (tx *Txn) OpenInode(ctx context.Context, ino uint64) (*File, error) {
	r, err := tx.call(ctx, &wire.Request{Op: wire.OpStat, Ino: ino, Flags: wire.FlagBlocks})
	if err != nil {
		return nil, err
	}
	return tx.openResp(ctx, fmt.Sprintf("inode %d", ino), r)
}

func (tx *Txn) openResp(ctx context.Context, path string, r *wire.Response) (*File, error) {
	f, err := tx.openInfo(ctx, path, infoOf(r.Attr))
	if err != nil {
		return nil, err
	}
	if len(r.Counters) > 0 && r.Counters[0] == wire.BlocksIncluded {
		f.setBlocks(r.Extents)
	}
	return f, nil
}

// CreateFile creates a new file and opens it.
func (tx *Txn) CreateFile(ctx context.Context, path string, opt CreateOptions) (*File, error) {
	fi, err := tx.Create(ctx, path, opt)
	if err != nil {
		return nil, err
	}
	return tx.openInfo(ctx, path, fi)
}

func (tx *Txn) openInfo(ctx context.Context, path string, fi FileInfo) (*File, error) {
	switch fi.Type {
	case TypeDir:
		return nil, &Error{Code: ErrorCode(wire.ErrCodeIsDir), Msg: path + ": is a directory"}
	case TypeFile:
	default:
		return nil, &Error{Code: ErrorCode(wire.ErrCodeInvalid), Msg: path + ": not a regular file"}
	}
	f := &File{tx: tx, ctx: ctx, path: path, ino: fi.Ino, bs: fi.Blocksize, size: fi.Size, dirty: map[uint64][]byte{}, kept: map[uint64]int{}, unloaded: map[uint64]prefixSource{}, FlushBlocks: 64}
	tx.mu.Lock()
	tx.files = append(tx.files, f)
	tx.mu.Unlock()
	return f, nil
}

// Ino returns the file's inode number.
func (f *File) Ino() uint64 { return f.ino }

// Size returns the file size as this transaction sees it.
func (f *File) Size() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.size
}

// Name returns the path the file was opened with.
func (f *File) Name() string { return f.path }

// setBlocks installs a block list and schedules its refresh at half the
// lifetime of its earliest ticket, so a long reader never holds expired
// tickets. Called with f.mu held (or before f is shared).
func (f *File) setBlocks(xs []wire.Extent) {
	f.xs = xs
	f.loaded = true
	now := time.Now()
	f.refreshAt = now.Add(100 * 365 * 24 * time.Hour)
	for _, x := range xs {
		for _, t := range x.Tickets {
			if exp, ok := auth.TicketExpiry(t); ok {
				if at := now.Add(exp.Sub(now) / 2); at.Before(f.refreshAt) {
					f.refreshAt = at
				}
			}
		}
	}
}

// loadBlocks fetches the whole block list in one call (again once its
// tickets approach expiry); afterwards reading needs no namenode request.
// The transaction gets the same version each time. Called with f.mu held.
func (f *File) loadBlocks() error {
	if f.loaded && time.Now().Before(f.refreshAt) {
		return nil
	}
	r, err := f.tx.call(f.ctx, &wire.Request{Op: wire.OpBlocks, Ino: f.ino})
	if err != nil {
		return fmt.Errorf("%s: block list: %w", f.path, err)
	}
	f.setBlocks(r.Extents)
	return nil
}

type location struct {
	addr   string
	block  uint64
	node   string
	info   wire.NodeInfo
	ticket []byte
	// valid is how much of the block lies before the end of the file:
	// the rest is zeros, so a short-circuit reader need not read it.
	valid int
}

// locate returns the replicas of block idx (live ones first, spread over
// replicas by index) and its checksum; ok is false for a hole.
func (f *File) locate(idx uint64) (locs []location, crc uint32, ok bool) {
	i := sort.Search(len(f.xs), func(i int) bool { return f.xs[i].Index+uint64(f.xs[i].Count) > idx })
	if i == len(f.xs) || f.xs[i].Index > idx {
		return nil, 0, false
	}
	x := f.xs[i]
	k := idx - x.Index
	valid := int(min(max(f.size-int64(idx)*int64(f.bs), 0), int64(f.bs)))
	var dead []location
	n := len(x.Replicas)
	for j := 0; j < n; j++ {
		ri := (j + int(idx/128)) % n
		r := x.Replicas[ri]
		info, _ := f.tx.c.node(r.Node)
		l := location{addr: info.Addr, block: r.Start + k, node: info.Identity, info: info, ticket: ticketAt(x.Tickets, ri), valid: valid}
		if info.Alive {
			locs = append(locs, l)
		} else {
			dead = append(dead, l)
		}
	}
	return append(locs, dead...), x.CRC[k], true
}

// source is where block idx's bytes come from: copied already (buffered
// writes, a hole) or the replicas to read. Called with f.mu held.
func (f *File) source(idx uint64, buf []byte) (locs []location, crc uint32, done bool, err error) {
	if b, ok, err := f.buffered(idx); err != nil || ok {
		if ok {
			copy(buf, b)
		}
		return nil, 0, ok, err
	}
	if err := f.waitFlush(); err != nil {
		return nil, 0, false, err
	}
	if err := f.loadBlocks(); err != nil {
		return nil, 0, false, err
	}
	locs, crc, ok := f.locate(idx)
	if !ok {
		clear(buf)
		return nil, 0, true, nil
	}
	return locs, crc, false, nil
}

// fetch reads from the replicas until one returns data matching the
// committed checksum. It needs no lock.
func (f *File) fetch(idx uint64, locs []location, crc uint32, buf []byte) error {
	var errs []string
	for _, l := range locs {
		if lf := f.tx.c.localFile(l.info); lf != nil {
			// Short-circuit: read the local datanode's block file directly,
			// the part before the end of the file (whole pages, as the
			// datanode stores it); a block that is not all there fails the
			// checksum and is read from the datanode, which knows.
			// Bytes past the valid ones may be a later version's (an
			// extension in place): they do not count.
			if _, err := lf.ReadAt(buf[:l.valid], int64(l.block)*int64(f.bs)); err == nil {
				clear(buf[l.valid:f.bs])
				if checksum(buf[:l.valid], f.bs) == crc {
					return nil
				}
			}
		}
		err := f.tx.c.data.readBlock(f.ctx, f.tx.reqID(), l.addr, l.block, l.ticket, buf, crc, l.valid)
		if err == nil {
			return nil
		}
		if cerr := f.ctx.Err(); cerr != nil {
			return fmt.Errorf("%s: block %d: %w", f.path, idx, cerr)
		}
		if !l.info.Alive {
			// Whatever answered at its address (nothing, or another
			// process that now has it), the replica's datanode is down.
			errs = append(errs, fmt.Sprintf("datanode %s (%s) is down: the namenode has no heartbeat from it (%v)", l.node, l.addr, err))
			continue
		}
		errs = append(errs, err.Error())
	}
	return fmt.Errorf("%s: block %d unreadable on every replica: %s (request %s)", f.path, idx, strings.Join(errs, "; "), wire.FormatReqID(f.tx.reqID()))
}

// readBlock reads block idx into buf (len = blocksize). Called with f.mu
// held; with unlock set, the lock is released while the datanodes are
// read, so concurrent readers overlap. When every replica fails, the
// block list is fetched again once (fresh tickets, replicas that moved)
// and the read retried.
func (f *File) readBlock(idx uint64, buf []byte, unlock bool) error {
	var err error
	for attempt := 0; attempt < 2; attempt++ {
		if attempt > 0 {
			f.loaded = false
		}
		locs, crc, done, serr := f.source(idx, buf)
		if serr != nil || done {
			return serr
		}
		if unlock {
			f.mu.Unlock()
		}
		err = f.fetch(idx, locs, crc, buf)
		if unlock {
			f.mu.Lock()
		}
		if err == nil || f.ctx.Err() != nil {
			return err
		}
	}
	return err
}

// ReadAt implements io.ReaderAt; it is safe for concurrent use.
func (f *File) ReadAt(p []byte, off int64) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.readAt(p, off)
}

// readAt is ReadAt with f.mu held (it is released during datanode reads).
func (f *File) readAt(p []byte, off int64) (int, error) {
	if f.closed {
		return 0, errEnded
	}
	// A cancelled context ends reads even where the data is at hand
	// (cached, read ahead), not only those that wait for a datanode.
	if err := f.ctx.Err(); err != nil {
		return 0, fmt.Errorf("%s: %w", f.path, err)
	}
	if off < 0 {
		return 0, fmt.Errorf("%s: negative offset", f.path)
	}
	start := off
	n := 0
	for n < len(p) && off < f.size {
		idx := uint64(off / int64(f.bs))
		in := int(off % int64(f.bs))
		want := min(len(p)-n, f.bs-in, int(f.size-off))
		b, buffered, err := f.buffered(idx)
		if err != nil {
			return n, err
		}
		if buffered {
			copy(p[n:n+want], b[in:])
		} else if f.cache != nil && f.cacheIdx == idx {
			copy(p[n:n+want], f.cache[in:])
		} else if pf := f.ahead[idx]; pf != nil {
			delete(f.ahead, idx)
			f.mu.Unlock()
			<-pf.done
			f.mu.Lock()
			if f.closed {
				return n, errEnded
			}
			if pf.err != nil {
				continue // read it again the usual way
			}
			if _, ok := f.dirty[idx]; ok {
				continue
			}
			if _, ok := f.inflight[idx]; ok {
				continue
			}
			f.cache, f.cacheIdx = pf.buf, idx
			copy(p[n:n+want], pf.buf[in:])
		} else if in == 0 && want == f.bs && len(p)-n >= f.bs {
			// A whole block: read it straight into the caller's buffer.
			if err := f.readBlock(idx, p[n:n+f.bs], true); err != nil {
				return n, err
			}
		} else {
			b := make([]byte, f.bs)
			if err := f.readBlock(idx, b, true); err != nil {
				return n, err
			}
			if f.closed {
				return n, errEnded
			}
			// Written meanwhile by this transaction: read again.
			if _, ok := f.dirty[idx]; ok {
				continue
			}
			if _, ok := f.inflight[idx]; ok {
				continue
			}
			f.cache, f.cacheIdx = b, idx
			copy(p[n:n+want], b[in:])
		}
		n += want
		off += int64(want)
	}
	f.readAhead(start, off)
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// Read implements io.Reader.
func (f *File) Read(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, err := f.readAt(p, f.pos)
	f.pos += int64(n)
	if err == io.EOF && n > 0 {
		err = nil
	}
	return n, err
}

// Seek implements io.Seeker.
func (f *File) Seek(offset int64, whence int) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		offset += f.pos
	case io.SeekEnd:
		offset += f.size
	default:
		return 0, fmt.Errorf("%s: bad whence %d", f.path, whence)
	}
	if offset < 0 {
		return 0, fmt.Errorf("%s: seek to negative offset", f.path)
	}
	f.pos = offset
	return offset, nil
}

// ReadAhead is how many blocks WriteTo fetches in parallel.
const ReadAhead = 8

// WriteTo streams the file from the current position to w, fetching
// ReadAhead blocks in parallel (io.Copy uses it).
func (f *File) WriteTo(w io.Writer) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return 0, errEnded
	}
	if err := f.waitFlush(); err != nil {
		return 0, err
	}
	if err := f.loadBlocks(); err != nil {
		return 0, err
	}
	if f.pos >= f.size {
		return 0, nil
	}
	size := f.size
	first := uint64(f.pos / int64(f.bs))
	last := uint64((size - 1) / int64(f.bs))
	type slot struct {
		buf  []byte
		err  error
		done chan struct{}
	}
	slots := make([]*slot, ReadAhead)
	for i := range slots {
		slots[i] = &slot{buf: make([]byte, f.bs)}
	}
	// The block sources are looked up under the lock; the fetches run
	// without it.
	start := func(idx uint64) {
		s := slots[idx%ReadAhead]
		s.done = make(chan struct{})
		locs, crc, done, err := f.source(idx, s.buf)
		if err != nil || done {
			s.err = err
			close(s.done)
			return
		}
		go func() {
			s.err = f.fetch(idx, locs, crc, s.buf)
			close(s.done)
		}()
	}
	next := first
	for ; next <= last && next < first+ReadAhead; next++ {
		start(next)
	}
	var written int64
	var werr error
	for idx := first; idx <= last; idx++ {
		s := slots[idx%ReadAhead]
		f.mu.Unlock()
		<-s.done
		f.mu.Lock()
		if werr == nil && s.err != nil {
			// Every replica failed: once more with a fresh block list.
			s.err = f.readBlock(idx, s.buf, true)
		}
		if werr == nil && s.err != nil {
			werr = s.err
		}
		if werr == nil {
			lo := 0
			if idx == first {
				lo = int(f.pos % int64(f.bs))
			}
			hi := f.bs
			if end := size - int64(idx)*int64(f.bs); end < int64(hi) {
				hi = int(end)
			}
			n, err := w.Write(s.buf[lo:hi])
			written += int64(n)
			f.pos += int64(n)
			werr = err
		}
		if werr == nil && next <= last {
			start(next)
			next++
		}
	}
	// Wait for fetches still running before returning their buffers.
	f.mu.Unlock()
	for _, s := range slots {
		if s.done != nil {
			<-s.done
		}
	}
	f.mu.Lock()
	return written, werr
}

// WriteAt implements io.WriterAt.
func (f *File) WriteAt(p []byte, off int64) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.writeAt(p, off)
}

func (f *File) writeAt(p []byte, off int64) (int, error) {
	if f.closed {
		return 0, errEnded
	}
	if off < 0 {
		return 0, fmt.Errorf("%s: negative offset", f.path)
	}
	if f.failed != nil {
		return 0, f.failed
	}
	if err := f.growing(off + int64(len(p))); err != nil {
		return 0, err
	}
	n := 0
	for n < len(p) {
		idx := uint64(off / int64(f.bs))
		in := int(off % int64(f.bs))
		m := min(len(p)-n, f.bs-in)
		b, ok := f.dirty[idx]
		if ok && in < f.bs {
			if err := f.loadPrefixBefore(idx, in); err != nil {
				return n, err
			}
		}
		if !ok {
			delete(f.unloaded, idx) // only dirty blocks have their bytes elsewhere
			f.kept[idx] = f.bs
			b = getBlockBuf(f.bs, m < f.bs)
			blockStart := int64(idx) * int64(f.bs)
			if m < f.bs && blockStart < f.size && f.deferPrefix(idx, int64(in)) {
				// An append into the last block: its committed bytes are
				// read only if they are needed (prefix.go).
			} else if m < f.bs && blockStart < f.size {
				// Partial write of an existing block: copy on write.
				if err := f.readBlock(idx, b, false); err != nil {
					putBlockBuf(b)
					return n, err
				}
				if valid := f.size - blockStart; valid < int64(f.bs) {
					clear(b[valid:]) // bytes past EOF read as zeros
				}
			}
			f.dirty[idx] = b
		}
		f.kept[idx] = min(f.kept[idx], in)
		copy(b[in:in+m], p[n:n+m])
		n += m
		off += int64(m)
		if off > f.size {
			f.size = off
		}
		if f.cacheIdx == idx {
			f.cacheIdx = ^uint64(0)
		}
		delete(f.ahead, idx)
	}
	if len(f.dirty) >= f.FlushBlocks {
		if err := f.startFlush(f.ctx); err != nil {
			return n, err
		}
	}
	return n, nil
}

// appendBlock adds buf (a pooled block buffer holding n valid bytes) as the
// next block at the current position, which must be block-aligned at the
// end of the file. The file takes ownership of buf.
func (f *File) appendBlock(buf []byte, n int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return errEnded
	}
	if f.failed != nil {
		return f.failed
	}
	if f.pos%int64(f.bs) != 0 || f.pos != f.size {
		_, err := f.writeAt(buf[:n], f.pos)
		f.pos += int64(n)
		putBlockBuf(buf)
		return err
	}
	clear(buf[n:])
	idx := uint64(f.pos / int64(f.bs))
	if old, ok := f.dirty[idx]; ok {
		putBlockBuf(old)
	}
	delete(f.ahead, idx)
	delete(f.unloaded, idx)
	f.dirty[idx] = buf
	f.kept[idx] = 0
	f.pos += int64(n)
	f.size = f.pos
	if len(f.dirty) >= f.FlushBlocks {
		return f.startFlush(f.ctx)
	}
	return nil
}

// Write implements io.Writer.
func (f *File) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, err := f.writeAt(p, f.pos)
	f.pos += int64(n)
	return n, err
}

// Truncate changes the file size; blocks past the end are freed at commit.
func (f *File) Truncate(size int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return errEnded
	}
	if size < 0 {
		return fmt.Errorf("%s: negative size", f.path)
	}
	if size < f.size {
		keep := uint64((size + int64(f.bs) - 1) / int64(f.bs))
		for idx, b := range f.dirty {
			if idx >= keep {
				delete(f.dirty, idx)
				delete(f.kept, idx)
				delete(f.unloaded, idx)
			} else if end := size - int64(idx)*int64(f.bs); end < int64(f.bs) {
				// The committed bytes first: the cut applies to them too.
				if err := f.loadPrefix(idx); err != nil {
					return err
				}
				clear(b[end:])
				f.kept[idx] = min(f.kept[idx], int(end))
			}
		}
		// A partial last block keeps stale bytes past the new end; rewrite
		// it zeroed so a later extension reads zeros there. It is read
		// first, while the size is the one its checksum goes with.
		var tail []byte
		if size%int64(f.bs) != 0 {
			tail = make([]byte, f.bs)
			if err := f.readBlock(uint64(size/int64(f.bs)), tail, false); err != nil {
				return err
			}
			clear(tail[size%int64(f.bs):])
		}
		// A size change not sent yet (a growth earlier in this
		// transaction) is superseded by this one; sent now it would be
		// refused when it grows past a partly filled last block, whose
		// dirty copy (growing) may just have been dropped.
		f.resize = false
		if err := f.flush(f.ctx); err != nil {
			return err
		}
		if err := f.tx.setSize(f.ctx, f.ino, size); err != nil {
			return err
		}
		f.loaded = false
		f.cacheIdx = ^uint64(0)
		clear(f.ahead)
		if tail != nil {
			idx := uint64(size / int64(f.bs))
			f.dirty[idx] = tail
			f.kept[idx] = 0
		}
	} else if err := f.growing(size); err != nil {
		return err
	}
	f.size = size
	f.resize = true
	return nil
}

// Flush writes the buffered blocks to the datanodes and records them in
// the transaction. Data is durable only after Commit.
func (f *File) Flush(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.flush(ctx)
}

func (f *File) flush(ctx context.Context) error {
	if f.closed {
		return nil
	}
	if err := f.startFlush(ctx); err != nil {
		return err
	}
	return f.waitFlush()
}

// startFlush hands the dirty blocks to a background writer (after the
// previous one finished), so the caller can go on filling new blocks while
// these travel to the datanodes.
func (f *File) startFlush(ctx context.Context) error {
	if err := f.waitFlush(); err != nil {
		return err
	}
	if len(f.dirty) == 0 {
		if f.resize {
			f.resize = false
			return f.tx.setSize(ctx, f.ino, f.size)
		}
		return nil
	}
	batch, kept, unl, size := f.dirty, f.kept, f.unloaded, f.size
	f.dirty, f.kept, f.unloaded = map[uint64][]byte{}, map[uint64]int{}, map[uint64]prefixSource{}
	f.resize = false
	f.inflight, f.inflightUnloaded = batch, unl
	done := make(chan error, 1)
	f.inflightErr = done
	go func() { done <- f.writeBatch(ctx, batch, kept, unl, size) }()
	return nil
}

// waitFlush waits for the background flush, if any.
func (f *File) waitFlush() error {
	if f.failed != nil {
		return f.failed
	}
	if f.inflightErr == nil {
		return nil
	}
	err := <-f.inflightErr
	f.inflightErr = nil
	for _, b := range f.inflight {
		putBlockBuf(b)
	}
	f.inflight, f.inflightUnloaded = nil, nil
	f.loaded = false
	if err != nil {
		f.failed = err
	}
	return err
}

// writeBatch writes blocks (of a file of the given size) and attaches them
// to the file in the transaction.
func (f *File) writeBatch(ctx context.Context, batch map[uint64][]byte, kept map[uint64]int, unl map[uint64]prefixSource, size int64) error {
	written, err := f.writeBlocks(ctx, batch, kept, unl, size)
	if err != nil {
		return err
	}
	if _, err := f.tx.call(ctx, f.attachReq(written, size)); err != nil {
		return fmt.Errorf("%s: %w", f.path, err)
	}
	return nil
}

// attachReq is the request that attaches written blocks to the file and
// sets its size.
func (f *File) attachReq(written []wire.Extent, size int64) *wire.Request {
	return &wire.Request{Op: wire.OpSetBlocks, Ino: f.ino, Extents: written, Flags: wire.FlagSize, Size: size}
}

// flushData writes the file's buffered blocks to the datanodes for a
// commit and returns the request that attaches them (nil if there is
// nothing to attach), so that the commit can send it together with the
// commit itself, after the datanodes' sync.
func (f *File) flushData(ctx context.Context) (*wire.Request, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil, nil
	}
	if err := f.waitFlush(); err != nil {
		return nil, err
	}
	if len(f.dirty) == 0 {
		if f.resize {
			f.resize = false
			return nil, f.tx.setSize(ctx, f.ino, f.size)
		}
		return nil, nil
	}
	batch, kept, unl, size := f.dirty, f.kept, f.unloaded, f.size
	f.dirty, f.kept, f.unloaded = map[uint64][]byte{}, map[uint64]int{}, map[uint64]prefixSource{}
	f.resize = false
	written, err := f.writeBlocks(ctx, batch, kept, unl, size)
	for _, b := range batch {
		putBlockBuf(b)
	}
	f.loaded = false
	if err != nil {
		f.failed = err
		return nil, err
	}
	return f.attachReq(written, size), nil
}

// writeBlocks writes blocks (of a file of the given size) to the
// datanodes and returns their extents, not yet attached to the file.
func (f *File) writeBlocks(ctx context.Context, batch map[uint64][]byte, kept map[uint64]int, unl map[uint64]prefixSource, size int64) ([]wire.Extent, error) {
	idxs := make([]uint64, 0, len(batch))
	var written []wire.Extent
	for i := range batch {
		if kept[i] > 0 {
			x, ok, err := f.extendBlock(ctx, i, batch[i], kept[i], size)
			if err != nil {
				return nil, err
			}
			if ok {
				written = append(written, x)
				continue
			}
		}
		if src, ok := unl[i]; ok {
			// Copy on write after all: the committed bytes are needed.
			if err := f.fetchPrefix(i, src, batch[i]); err != nil {
				return nil, err
			}
		}
		idxs = append(idxs, i)
	}
	sort.Slice(idxs, func(a, b int) bool { return idxs[a] < idxs[b] })
	for i := 0; i < len(idxs); {
		j := i + 1
		for j < len(idxs) && idxs[j] == idxs[j-1]+1 && j-i < 1024 {
			j++
		}
		xs, err := f.writeRange(ctx, batch, size, idxs[i], idxs[i:j])
		if err != nil {
			return nil, err
		}
		written = append(written, xs...)
		i = j
	}
	return written, nil
}

// writeRange allocates and writes the contiguous dirty blocks idxs. A
// failing datanode is excluded and the blocks are allocated again.
func (f *File) writeRange(ctx context.Context, batch map[uint64][]byte, size int64, first uint64, idxs []uint64) ([]wire.Extent, error) {
	var exclude []string
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		pref := append([]string(nil), exclude...)
		r, err := f.tx.call(ctx, &wire.Request{Op: wire.OpAllocate, Ino: f.ino, Index: first, Count: uint64(len(idxs)), Pref: pref, Size: size})
		if err != nil {
			if lastErr != nil {
				return nil, fmt.Errorf("%s: %w (after: %v)", f.path, err, lastErr)
			}
			return nil, fmt.Errorf("%s: allocate blocks: %w", f.path, err)
		}
		out := make([]wire.Extent, 0, len(r.Extents))
		failed := false
		for _, x := range r.Extents {
			blocks := make([][]byte, x.Count)
			crcs := make([]uint32, x.Count)
			for k := range blocks {
				idx := x.Index + uint64(k)
				b := batch[idx]
				if end := size - int64(idx)*int64(f.bs); end < int64(f.bs) {
					b = b[:end]
				}
				blocks[k] = b
				crcs[k] = checksum(b, f.bs)
			}
			addrs, starts := f.tx.c.replicaAddrs(x)
			if err := f.writeReplicas(ctx, x, addrs, starts, blocks, crcs); err != nil {
				lastErr = err
				failed = true
				var we *writeError
				// Tickets issued before a datanode's restart (or the
				// namenode's) are refused: not the datanode's fault,
				// the allocation is asked for again, with new tickets.
				if errors.As(err, &we) && !strings.Contains(err.Error(), auth.ErrTicketOutdated.Error()) {
					for _, rp := range x.Replicas {
						info, _ := f.tx.c.node(rp.Node)
						if slices.Contains(we.blame, info.Addr) {
							exclude = append(exclude, "-"+info.Identity)
						}
					}
				}
				break
			}
			f.tx.wroteTo(addrs)
			x.CRC = crcs
			x.Tickets = nil
			out = append(out, x)
		}
		if !failed {
			return out, nil
		}
	}
	return nil, fmt.Errorf("%s: write failed: %w", f.path, lastErr)
}

// abandon waits for the background write and makes the file unusable,
// dropping what is buffered (the transaction is being aborted).
func (f *File) abandon() {
	f.mu.Lock()
	f.waitFlush()
	for _, b := range f.dirty {
		putBlockBuf(b)
	}
	f.dirty, f.kept, f.unloaded = map[uint64][]byte{}, map[uint64]int{}, map[uint64]prefixSource{}
	f.closed = true
	f.mu.Unlock()
	f.aheadWG.Wait()
}

// Close flushes buffered writes; the file is unusable afterwards.
func (f *File) Close() error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil
	}
	err := f.flush(f.ctx)
	f.closed = true
	f.mu.Unlock()
	f.aheadWG.Wait()
	f.tx.mu.Lock()
	for i, g := range f.tx.files {
		if g == f {
			f.tx.files = append(f.tx.files[:i], f.tx.files[i+1:]...)
			break
		}
	}
	f.tx.mu.Unlock()
	return err
}

var _ interface {
	io.ReadWriteSeeker
	io.ReaderAt
	io.WriterAt
	io.WriterTo
} = (*File)(nil)

// Block buffers are recycled: a long write would otherwise allocate (and
// zero) its whole size.
var blockPools sync.Map // blocksize → *sync.Pool

// getBlockBuf returns a block buffer, zeroed if it will not be overwritten
// whole.
func getBlockBuf(bs int, zero bool) []byte {
	p, ok := blockPools.Load(bs)
	if !ok {
		p, _ = blockPools.LoadOrStore(bs, &sync.Pool{New: func() any { b := make([]byte, bs); return &b }})
	}
	b := *p.(*sync.Pool).Get().(*[]byte)
	if zero {
		clear(b)
	}
	return b
}

func putBlockBuf(b []byte) {
	if p, ok := blockPools.Load(cap(b)); ok {
		b = b[:cap(b)]
		p.(*sync.Pool).Put(&b)
	}
}
