package client

import (
	"fmt"
	"io"
	"sort"
	"sync"
	"time"

	"github.com/plasmafs/plasma/internal/auth"
	"github.com/plasmafs/plasma/internal/wire"
)

// blockReader is the read path of a File: it holds the file's block list
// (one committed version, refreshed before its tickets expire), locates a
// block's replicas, fetches blocks (data.go), caches the last one read for
// small sequential reads and reads ahead for sequential readers. The
// transaction's own writes, which the writer holds, come first: a block
// the writer has is read from there.
//
// Its state is guarded by the file's lock (fileState.mu), released while
// datanodes are read and while bytes are copied out of a block, so that
// concurrent ReadAt calls (the kernel sends several READs of one file at
// once) fetch and copy in parallel. The cached and read-ahead blocks are
// shared blocks (sharedblock.go): a block replaced in the cache stays
// intact until the last read copying from it, or the last reply sending
// it, lets go.
type blockReader struct {
	*fileState
	w *blockWriter // this transaction's writes, read before the committed blocks

	xs        []wire.Extent
	loaded    bool
	refreshAt time.Time // reload the block list (fresh tickets) after this

	cacheIdx uint64 // last block read, for small sequential reads
	cache    *sharedBlock

	// Read-ahead of a sequential reader (see readAhead).
	ends    [8]int64 // where the last reads ended (a ring, newest at endsAt-1)
	endsAt  int
	seqFar  int64 // the furthest a run of sequential reads has reached
	seqRun  int   // sequential reads in a row
	ahead   map[uint64]*prefetched
	aheadWG sync.WaitGroup
}

// setBlocks installs a block list and schedules its refresh at half the
// lifetime of its earliest ticket, so a long reader never holds expired
// tickets. Called with the lock held (or before the file is shared).
func (r *blockReader) setBlocks(xs []wire.Extent) {
	r.xs = xs
	r.loaded = true
	now := time.Now()
	r.refreshAt = now.Add(100 * 365 * 24 * time.Hour)
	for _, x := range xs {
		for _, t := range x.Tickets {
			if exp, ok := auth.TicketExpiry(t); ok {
				if at := now.Add(exp.Sub(now) / 2); at.Before(r.refreshAt) {
					r.refreshAt = at
				}
			}
		}
	}
}

// loadBlocks fetches the whole block list in one call (again once its
// tickets approach expiry, or once the writer changed it); afterwards
// reading needs no namenode request. The transaction gets the same version
// each time. Called with the lock held.
func (r *blockReader) loadBlocks() error {
	if r.loaded && time.Now().Before(r.refreshAt) {
		return nil
	}
	resp, err := r.tx.call(r.ctx, &wire.Request{Op: wire.OpBlocks, Ino: r.ino})
	if err != nil {
		return fmt.Errorf("%s: block list: %w", r.path, err)
	}
	r.setBlocks(resp.Extents)
	return nil
}

// locate returns the replicas of block idx (live ones first, spread over
// replicas by index) and its checksum; ok is false for a hole.
func (r *blockReader) locate(idx uint64) (locs []location, crc uint32, ok bool) {
	i := sort.Search(len(r.xs), func(i int) bool { return r.xs[i].Index+uint64(r.xs[i].Count) > idx })
	if i == len(r.xs) || r.xs[i].Index > idx {
		return nil, 0, false
	}
	x := r.xs[i]
	k := idx - x.Index
	valid := int(min(max(r.size-int64(idx)*int64(r.bs), 0), int64(r.bs)))
	var dead []location
	n := len(x.Replicas)
	for j := 0; j < n; j++ {
		ri := (j + int(idx/128)) % n
		rp := x.Replicas[ri]
		info, _ := r.tx.c.node(rp.Node)
		l := location{addr: info.Addr, block: rp.Start + k, node: info.Identity, info: info, ticket: ticketAt(x.Tickets, ri), valid: valid}
		if info.Alive {
			locs = append(locs, l)
		} else {
			dead = append(dead, l)
		}
	}
	return append(locs, dead...), x.CRC[k], true
}

// source is where block idx's bytes come from: copied already (buffered
// writes, a hole) or the replicas to read. Called with the lock held.
func (r *blockReader) source(idx uint64, buf []byte) (locs []location, crc uint32, done bool, err error) {
	if b, ok, err := r.w.buffered(idx); err != nil || ok {
		if ok {
			copy(buf, b)
		}
		return nil, 0, ok, err
	}
	if err := r.w.waitFlush(); err != nil {
		return nil, 0, false, err
	}
	if err := r.loadBlocks(); err != nil {
		return nil, 0, false, err
	}
	locs, crc, ok := r.locate(idx)
	if !ok {
		clear(buf)
		return nil, 0, true, nil
	}
	return locs, crc, false, nil
}

// fetch reads block idx from its replicas (data.go). It needs no lock.
func (r *blockReader) fetch(idx uint64, locs []location, crc uint32, buf []byte) error {
	return r.tx.readReplicas(r.ctx, r.path, r.ino, idx, locs, crc, buf, r.bs)
}

// readBlock reads block idx into buf (len = blocksize). Called with the
// lock held; with unlock set, the lock is released while the datanodes are
// read, so concurrent readers overlap. When every replica fails, the
// block list is fetched again once (fresh tickets, replicas that moved)
// and the read retried.
func (r *blockReader) readBlock(idx uint64, buf []byte, unlock bool) error {
	var err error
	for attempt := 0; attempt < 2; attempt++ {
		if attempt > 0 {
			r.loaded = false
		}
		locs, crc, done, serr := r.source(idx, buf)
		if serr != nil || done {
			return serr
		}
		if unlock {
			r.mu.Unlock()
		}
		err = r.fetch(idx, locs, crc, buf)
		if unlock {
			r.mu.Lock()
		}
		if err == nil || r.ctx.Err() != nil {
			return err
		}
	}
	return err
}

// forget drops what the reader holds of block idx (cached, read ahead):
// the transaction is writing it.
func (r *blockReader) forget(idx uint64) {
	if r.cacheIdx == idx {
		r.cacheIdx = ^uint64(0)
	}
	r.dropAhead(idx)
}

// dropAhead removes block idx from the read-ahead map, letting go of the
// map's hold on its buffer (the fetch and any waiting read hold their own).
func (r *blockReader) dropAhead(idx uint64) {
	if pf := r.ahead[idx]; pf != nil {
		delete(r.ahead, idx)
		pf.blk.release()
	}
}

// forgetAll drops the block list, the cached block and the blocks read
// ahead: the file was cut.
func (r *blockReader) forgetAll() {
	r.loaded = false
	r.cacheIdx = ^uint64(0)
	for idx := range r.ahead {
		r.dropAhead(idx)
	}
}

// releaseBlocks lets go of the reader's holds on its cached and read-ahead
// blocks when the file ends, so their buffers go back to the pool once
// the last read copying from them and the last reply sending them (which
// hold their own) let go. Called with the lock held, the file closed:
// no read takes a new hold afterwards.
func (r *blockReader) releaseBlocks() {
	if r.cache != nil {
		r.cache.release()
		r.cache = nil
	}
	r.cacheIdx = ^uint64(0)
	for idx := range r.ahead {
		r.dropAhead(idx)
	}
}

// readViews collects what a shared read (ReadAtShared) hands out: the
// slices to send, in file order, and the blocks they point into, held
// until release.
type readViews struct {
	bufs [][]byte
	held []*sharedBlock
}

// release lets go of the blocks the views point into.
func (v *readViews) release() {
	for _, b := range v.held {
		b.release()
	}
	v.bufs, v.held = nil, nil
}

// readAt reads like io.ReaderAt. Called with the lock held (it is
// released during datanode reads and copies). With v set, bytes that lie
// in a shared block are not copied into p: v gets a slice of the block
// (and a hold on it) instead; the other bytes go into p as usual and v
// gets that slice of p.
func (r *blockReader) readAt(p []byte, off int64, v *readViews) (int, error) {
	if r.closed {
		return 0, errEnded
	}
	// A cancelled context ends reads even where the data is at hand
	// (cached, read ahead), not only those that wait for a datanode.
	if err := r.ctx.Err(); err != nil {
		return 0, fmt.Errorf("%s: %w", r.path, err)
	}
	if off < 0 {
		return 0, fmt.Errorf("%s: negative offset", r.path)
	}
	start := off
	n := 0
	for n < len(p) && off < r.size {
		if r.closed {
			return n, errEnded // closed while the lock was released
		}
		idx := uint64(off / int64(r.bs))
		in := int(off % int64(r.bs))
		want := min(len(p)-n, r.bs-in, int(r.size-off))
		dst := p[n : n+want]
		b, buffered, err := r.w.buffered(idx)
		if err != nil {
			return n, err
		}
		if buffered {
			copy(dst, b[in:])
			v.add(dst)
		} else if r.cache != nil && r.cacheIdx == idx {
			r.cache.acquire()
			r.deliver(r.cache, in, dst, v)
		} else if pf := r.ahead[idx]; pf != nil {
			// Hold the block while waiting: the map's hold may go (the
			// block is pruned, or cached and replaced) meanwhile.
			pf.blk.acquire()
			r.mu.Unlock()
			<-pf.done
			r.mu.Lock()
			if pf.err != nil || r.closed || r.w.holds(idx) {
				// Failed (read it again the usual way), or written
				// meanwhile by this transaction (read that).
				pf.blk.release()
				if r.ahead[idx] == pf {
					r.dropAhead(idx)
				}
				continue
			}
			if r.ahead[idx] == pf {
				delete(r.ahead, idx)
				r.setCache(pf.blk, idx) // the map's hold becomes the cache's
			}
			r.deliver(pf.blk, in, dst, v)
		} else if in == 0 && want == r.bs {
			// A whole block: read it straight into the caller's buffer.
			if err := r.readBlock(idx, dst, true); err != nil {
				return n, err
			}
			v.add(dst)
		} else {
			b := getBlockBuf(r.bs, false)
			if err := r.readBlock(idx, b, true); err != nil {
				putBlockBuf(b)
				return n, err
			}
			if r.closed || r.w.holds(idx) {
				// Closed, or written meanwhile by this transaction: read
				// again (the loop's check ends a closed file's read).
				putBlockBuf(b)
				continue
			}
			blk := newSharedBlock(b, 2) // the cache's hold and this read's
			r.setCache(blk, idx)
			r.deliver(blk, in, dst, v)
		}
		n += want
		off += int64(want)
	}
	r.readAhead(start, off)
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// deliver hands the bytes of blk from in on to a read, taking over the
// read's hold on blk: with v set, as a slice of blk (v keeps the hold);
// otherwise copied into dst, without the lock, so that concurrent reads
// copy in parallel. Called with the lock held.
func (r *blockReader) deliver(blk *sharedBlock, in int, dst []byte, v *readViews) {
	if v != nil {
		v.bufs = append(v.bufs, blk.buf[in:in+len(dst)])
		v.held = append(v.held, blk)
		return
	}
	r.mu.Unlock()
	copy(dst, blk.buf[in:])
	blk.release()
	r.mu.Lock()
}

// add appends a slice of the caller's buffer to the views, if any.
func (v *readViews) add(b []byte) {
	if v != nil {
		v.bufs = append(v.bufs, b)
	}
}

// writeToAhead is how many blocks WriteTo fetches in parallel.
const writeToAhead = 8

// writeTo streams the file from *pos to w, fetching writeToAhead blocks in
// parallel, and advances *pos. Called with the lock held (it is released
// while blocks are fetched and while w writes).
func (r *blockReader) writeTo(w io.Writer, pos *int64, limit int64) (int64, error) {
	if r.closed {
		return 0, errEnded
	}
	if err := r.w.waitFlush(); err != nil {
		return 0, err
	}
	if err := r.loadBlocks(); err != nil {
		return 0, err
	}
	if *pos >= r.size {
		return 0, nil
	}
	size := r.size
	if limit >= 0 && *pos+limit < size {
		// Nothing past the range is fetched: neither read ahead nor sent.
		size = *pos + limit
	}
	if size <= *pos {
		return 0, nil
	}
	first := uint64(*pos / int64(r.bs))
	last := uint64((size - 1) / int64(r.bs))
	type slot struct {
		buf  []byte
		err  error
		done chan struct{}
	}
	// No more slots than blocks in the range, their buffers from the
	// block pool (each fetch path fills the whole block): a fresh,
	// zeroed megabyte per slot cost a small file's WriteTo (a WebHDFS
	// OPEN of a few KiB) eight of them per call.
	slots := make([]*slot, min(writeToAhead, last-first+1))
	for i := range slots {
		slots[i] = &slot{buf: getBlockBuf(r.bs, false)}
	}
	ahead := uint64(len(slots))
	// The block sources are looked up under the lock; the fetches run
	// without it.
	start := func(idx uint64) {
		s := slots[idx%ahead]
		s.done = make(chan struct{})
		locs, crc, done, err := r.source(idx, s.buf)
		if err != nil || done {
			s.err = err
			close(s.done)
			return
		}
		go func() {
			s.err = r.fetch(idx, locs, crc, s.buf)
			close(s.done)
		}()
	}
	next := first
	for ; next <= last && next < first+ahead; next++ {
		start(next)
	}
	var written int64
	var werr error
	for idx := first; idx <= last; idx++ {
		s := slots[idx%ahead]
		r.mu.Unlock()
		<-s.done
		r.mu.Lock()
		if werr == nil && s.err != nil {
			// Every replica failed: once more with a fresh block list.
			s.err = r.readBlock(idx, s.buf, true)
		}
		if werr == nil && s.err != nil {
			werr = s.err
		}
		if werr == nil {
			lo := 0
			if idx == first {
				lo = int(*pos % int64(r.bs))
			}
			hi := r.bs
			if end := size - int64(idx)*int64(r.bs); end < int64(hi) {
				hi = int(end)
			}
			n, err := w.Write(s.buf[lo:hi])
			written += int64(n)
			*pos += int64(n)
			werr = err
		}
		if werr == nil && next <= last {
			start(next)
			next++
		}
	}
	// Wait for fetches still running before returning their buffers.
	r.mu.Unlock()
	for _, s := range slots {
		if s.done != nil {
			<-s.done
		}
		putBlockBuf(s.buf)
	}
	r.mu.Lock()
	return written, werr
}

// Read-ahead for sequential readers through ReadAt (the FUSE mount and
// the NFS bridge read a file as a series of ReadAt calls, each waiting for
// the one before): once two reads in a row are sequential, the next blocks
// are fetched in the background, so the datanode round trip of block k+1
// overlaps the reader's use of block k. WriteTo (plasma get, io.Copy) has
// its own, wider pipeline.

// readAheadBytes bounds what one File fetches ahead.
const readAheadBytes = 4 << 20

// prefetched is a block being read ahead. Its block is held by the
// read-ahead map (until the entry is dropped or becomes the cache), by the
// fetch (until it ends) and by each read waiting for it.
type prefetched struct {
	blk  *sharedBlock
	err  error
	done chan struct{} // closed when blk's bytes and err are set
}

// readAhead notes a read of [start, end) and, if the reader is
// sequential, starts fetching the blocks after end. Called with the lock
// held.
//
// Concurrent reads of a sequential reader (the kernel's READs of one file
// are answered in parallel) end out of order, so a read counts as
// sequential if it begins where any of the last few reads ended, and the
// read-ahead runs from the furthest of them.
func (r *blockReader) readAhead(start, end int64) {
	seq := false
	if end > start {
		for _, e := range r.ends {
			if e == start {
				seq = true
				break
			}
		}
	}
	r.ends[r.endsAt%len(r.ends)] = end
	r.endsAt++
	if seq {
		r.seqRun++
		r.seqFar = max(r.seqFar, end)
	} else {
		r.seqRun = 0
		r.seqFar = end
	}
	if r.closed {
		return // Close may be waiting for the fetches already started
	}
	bs := int64(r.bs)
	first := uint64(r.seqFar / bs)
	// Blocks behind the reader are of no use any more; a sequential
	// reader's reads still in flight may want those just behind.
	keep := first
	if seq {
		keep = uint64(max(r.seqFar-readAheadBytes, 0) / bs)
	}
	for idx := range r.ahead {
		if idx < keep {
			r.dropAhead(idx)
		}
	}
	if r.seqRun < 1 {
		return
	}
	if r.cache != nil && r.cacheIdx == first {
		first++
	}
	n := max(1, readAheadBytes/bs)
	for idx := first; idx < first+uint64(n) && int64(idx)*bs < r.size; idx++ {
		if r.ahead[idx] != nil {
			continue
		}
		if r.w.holds(idx) {
			continue
		}
		if r.ahead == nil {
			r.ahead = map[uint64]*prefetched{}
		}
		// Held by the map and by the fetch.
		pf := &prefetched{blk: newSharedBlock(getBlockBuf(r.bs, false), 2), done: make(chan struct{})}
		r.ahead[idx] = pf
		r.aheadWG.Add(1)
		go r.prefetch(idx, pf)
	}
}

// prefetch reads block idx into pf the way readBlock does (buffered
// writes and holes included), without holding the lock during the read.
func (r *blockReader) prefetch(idx uint64, pf *prefetched) {
	defer r.aheadWG.Done()
	defer pf.blk.release()
	defer close(pf.done)
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		pf.err = errEnded
		return
	}
	locs, crc, done, err := r.source(idx, pf.blk.buf)
	r.mu.Unlock()
	if err != nil || done {
		pf.err = err
		return
	}
	pf.err = r.fetch(idx, locs, crc, pf.blk.buf)
}

// setCache makes blk the cached copy of block idx, taking over the
// caller's hold on it. The buffers come from the block pool (every fetch
// path writes the whole block, so none needs zeroing) and the one
// replaced goes back to it once its last reader lets go. Fresh 1 MiB
// buffers per block cost a sequential reader through the mount a third of
// its CPU in page faults and zeroing.
func (r *blockReader) setCache(blk *sharedBlock, idx uint64) {
	if r.cache != nil {
		r.cache.release()
	}
	r.cache, r.cacheIdx = blk, idx
}
