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
// datanodes are read.
type blockReader struct {
	*fileState
	w *blockWriter // this transaction's writes, read before the committed blocks

	xs        []wire.Extent
	loaded    bool
	refreshAt time.Time // reload the block list (fresh tickets) after this

	cacheIdx uint64 // last block read, for small sequential reads
	cache    []byte

	// Read-ahead of a sequential reader (see readAhead).
	seqEnd  int64 // where the last read ended
	seqRun  int   // reads in a row that began where the one before ended
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
	delete(r.ahead, idx)
}

// forgetAll drops the block list, the cached block and the blocks read
// ahead: the file was cut.
func (r *blockReader) forgetAll() {
	r.loaded = false
	r.cacheIdx = ^uint64(0)
	clear(r.ahead)
}

// readAt reads like io.ReaderAt. Called with the lock held (it is
// released during datanode reads).
func (r *blockReader) readAt(p []byte, off int64) (int, error) {
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
		idx := uint64(off / int64(r.bs))
		in := int(off % int64(r.bs))
		want := min(len(p)-n, r.bs-in, int(r.size-off))
		b, buffered, err := r.w.buffered(idx)
		if err != nil {
			return n, err
		}
		if buffered {
			copy(p[n:n+want], b[in:])
		} else if r.cache != nil && r.cacheIdx == idx {
			copy(p[n:n+want], r.cache[in:])
		} else if pf := r.ahead[idx]; pf != nil {
			delete(r.ahead, idx)
			r.mu.Unlock()
			<-pf.done
			r.mu.Lock()
			if r.closed {
				return n, errEnded
			}
			if pf.err != nil {
				continue // read it again the usual way
			}
			if r.w.holds(idx) {
				continue
			}
			r.setCache(pf.buf, idx)
			copy(p[n:n+want], pf.buf[in:])
		} else if in == 0 && want == r.bs && len(p)-n >= r.bs {
			// A whole block: read it straight into the caller's buffer.
			if err := r.readBlock(idx, p[n:n+r.bs], true); err != nil {
				return n, err
			}
		} else {
			b := getBlockBuf(r.bs, false)
			if err := r.readBlock(idx, b, true); err != nil {
				putBlockBuf(b)
				return n, err
			}
			if r.closed {
				return n, errEnded
			}
			// Written meanwhile by this transaction: read again.
			if r.w.holds(idx) {
				continue
			}
			r.setCache(b, idx)
			copy(p[n:n+want], b[in:])
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

// prefetched is a block being read ahead.
type prefetched struct {
	buf  []byte
	err  error
	done chan struct{} // closed when buf and err are set
}

// readAhead notes a read of [start, end) and, if the reader is
// sequential, starts fetching the blocks after end. Called with the lock
// held.
func (r *blockReader) readAhead(start, end int64) {
	if start == r.seqEnd && end > start {
		r.seqRun++
	} else {
		r.seqRun = 0
	}
	r.seqEnd = end
	if r.closed {
		return // Close may be waiting for the fetches already started
	}
	bs := int64(r.bs)
	first := uint64(end / bs)
	// Blocks behind the reader are of no use any more.
	for idx := range r.ahead {
		if idx < first {
			delete(r.ahead, idx)
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
		pf := &prefetched{buf: getBlockBuf(r.bs, false), done: make(chan struct{})}
		r.ahead[idx] = pf
		r.aheadWG.Add(1)
		go r.prefetch(idx, pf)
	}
}

// prefetch reads block idx into pf the way readBlock does (buffered
// writes and holes included), without holding the lock during the read.
func (r *blockReader) prefetch(idx uint64, pf *prefetched) {
	defer r.aheadWG.Done()
	defer close(pf.done)
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		pf.err = errEnded
		return
	}
	locs, crc, done, err := r.source(idx, pf.buf)
	r.mu.Unlock()
	if err != nil || done {
		pf.err = err
		return
	}
	pf.err = r.fetch(idx, locs, crc, pf.buf)
}

// setCache makes b the cached copy of block idx. The buffers come from the
// block pool (every fetch path writes the whole block, so none needs
// zeroing) and the one replaced goes back to it: it is read only under the
// lock, by copying. Fresh 1 MiB buffers per block cost a sequential reader
// through the mount a third of its CPU in page faults and zeroing.
func (r *blockReader) setCache(b []byte, idx uint64) {
	if r.cache != nil {
		putBlockBuf(r.cache)
	}
	r.cache, r.cacheIdx = b, idx
}
