package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/plasmafs/plasma/internal/auth"
	"github.com/plasmafs/plasma/internal/blockcrc"
	"github.com/plasmafs/plasma/internal/wire"
)

// blockWriter is the write path of a File: it buffers the transaction's
// writes in whole dirty blocks and sends them to the datanodes, one batch
// in the background while the next fills up. Blocks are copy-on-write: a
// flush writes dirty blocks to newly allocated blocks (writeRange), except
// that a small append to the committed, partly filled last block extends
// it in place (extendBlock), for which the block's committed bytes need
// not be read at all (deferPrefix). Commit calls one method, commitData,
// which writes what is left and returns the request attaching it.
//
// Its state is guarded by the file's lock (fileState.mu); the background
// flush works on a batch handed over to it and takes no lock.
type blockWriter struct {
	*fileState
	r *blockReader // the committed bytes a partial write copies

	dirty map[uint64][]byte
	// kept[idx]: how many bytes at the start of dirty block idx are still
	// the committed version's (written blocks: from their first write on),
	// so a flush may extend that block in place (extendBlock).
	kept map[uint64]int
	// journal: the extensions written since the last attachment, which
	// its request carries for a journaled commit (journal.go).
	journal []wire.JournalWrite
	// unloaded[idx]: dirty block idx was begun past the end of the file
	// without reading the committed bytes before (an append that may extend
	// the block in place needs none); they are fetched from there if they
	// are needed after all (deferPrefix).
	unloaded map[uint64]prefixSource
	resize   bool     // size changed without data (truncate/extend) and not sent yet
	topology Topology // how writes reach the replicas

	// One flush runs in the background while the next blocks fill up.
	inflight         map[uint64][]byte
	inflightUnloaded map[uint64]prefixSource
	inflightErr      chan error
	failed           error // a background flush failed: the file is unusable

	// flushBlocks is how many dirty blocks are buffered before they are
	// written out.
	flushBlocks int
}

// defaultFlushBlocks is the flushBlocks of a new file.
const defaultFlushBlocks = 64

func newBlockWriter(st *fileState, r *blockReader) *blockWriter {
	return &blockWriter{fileState: st, r: r, dirty: map[uint64][]byte{}, kept: map[uint64]int{}, unloaded: map[uint64]prefixSource{}, flushBlocks: defaultFlushBlocks}
}

// holds reports whether the writer has block idx (dirty or being
// written): the transaction's version of it, not the committed one.
func (w *blockWriter) holds(idx uint64) bool {
	if _, ok := w.dirty[idx]; ok {
		return true
	}
	_, ok := w.inflight[idx]
	return ok
}

// writeAt writes p at off like io.WriterAt. Called with the lock held.
func (w *blockWriter) writeAt(p []byte, off int64) (int, error) {
	if w.closed {
		return 0, errEnded
	}
	if off < 0 {
		return 0, fmt.Errorf("%s: negative offset", w.path)
	}
	if w.failed != nil {
		return 0, w.failed
	}
	if err := w.growing(off + int64(len(p))); err != nil {
		return 0, err
	}
	n := 0
	for n < len(p) {
		idx := uint64(off / int64(w.bs))
		in := int(off % int64(w.bs))
		m := min(len(p)-n, w.bs-in)
		b, ok := w.dirty[idx]
		if ok && in < w.bs {
			if err := w.loadPrefixBefore(idx, in); err != nil {
				return n, err
			}
		}
		if !ok {
			delete(w.unloaded, idx) // only dirty blocks have their bytes elsewhere
			w.kept[idx] = w.bs
			b = getBlockBuf(w.bs, m < w.bs)
			blockStart := int64(idx) * int64(w.bs)
			if m < w.bs && blockStart < w.size && w.deferPrefix(idx, int64(in)) {
				// An append into the last block: its committed bytes are
				// read only if they are needed (deferPrefix).
			} else if m < w.bs && blockStart < w.size {
				// Partial write of an existing block: copy on write.
				if err := w.r.readBlock(idx, b, false); err != nil {
					putBlockBuf(b)
					return n, err
				}
				if valid := w.size - blockStart; valid < int64(w.bs) {
					clear(b[valid:]) // bytes past EOF read as zeros
				}
			}
			w.dirty[idx] = b
		}
		w.kept[idx] = min(w.kept[idx], in)
		copy(b[in:in+m], p[n:n+m])
		n += m
		off += int64(m)
		if off > w.size {
			w.size = off
		}
		w.r.forget(idx)
	}
	if len(w.dirty) >= w.flushBlocks {
		if err := w.startFlush(w.ctx); err != nil {
			return n, err
		}
	}
	return n, nil
}

// appendAt adds buf (a pooled block buffer holding n valid bytes) at pos;
// the writer takes ownership of buf. At a block-aligned pos at the end of
// the file the buffer becomes the next dirty block as it is, without a
// copy. Called with the lock held.
func (w *blockWriter) appendAt(buf []byte, n int, pos int64) error {
	if pos%int64(w.bs) != 0 || pos != w.size {
		_, err := w.writeAt(buf[:n], pos)
		putBlockBuf(buf)
		return err
	}
	clear(buf[n:])
	idx := uint64(pos / int64(w.bs))
	if old, ok := w.dirty[idx]; ok {
		putBlockBuf(old)
	}
	w.r.dropAhead(idx)
	delete(w.unloaded, idx)
	w.dirty[idx] = buf
	w.kept[idx] = 0
	w.size = pos + int64(n)
	if len(w.dirty) >= w.flushBlocks {
		return w.startFlush(w.ctx)
	}
	return nil
}

// truncate changes the file size; blocks past the end are freed at
// commit. Called with the lock held.
func (w *blockWriter) truncate(size int64) error {
	if size < w.size {
		keep := uint64((size + int64(w.bs) - 1) / int64(w.bs))
		for idx, b := range w.dirty {
			if idx >= keep {
				delete(w.dirty, idx)
				delete(w.kept, idx)
				delete(w.unloaded, idx)
			} else if end := size - int64(idx)*int64(w.bs); end < int64(w.bs) {
				// The committed bytes first: the cut applies to them too.
				if err := w.loadPrefix(idx); err != nil {
					return err
				}
				clear(b[end:])
				w.kept[idx] = min(w.kept[idx], int(end))
			}
		}
		// A partial last block keeps stale bytes past the new end; rewrite
		// it zeroed so a later extension reads zeros there. It is read
		// first, while the size is the one its checksum goes with.
		var tail []byte
		if size%int64(w.bs) != 0 {
			tail = make([]byte, w.bs)
			if err := w.r.readBlock(uint64(size/int64(w.bs)), tail, false); err != nil {
				return err
			}
			clear(tail[size%int64(w.bs):])
		}
		// A size change not sent yet (a growth earlier in this
		// transaction) is superseded by this one; sent now it would be
		// refused when it grows past a partly filled last block, whose
		// dirty copy (growing) may just have been dropped.
		w.resize = false
		if err := w.flush(w.ctx); err != nil {
			return err
		}
		if err := w.tx.setSize(w.ctx, w.ino, size); err != nil {
			return err
		}
		w.r.forgetAll()
		if tail != nil {
			idx := uint64(size / int64(w.bs))
			w.dirty[idx] = tail
			w.kept[idx] = 0
		}
	} else if err := w.growing(size); err != nil {
		return err
	}
	w.size = size
	w.resize = true
	return nil
}

// flush writes the dirty blocks to the datanodes and attaches them to the
// file in the transaction. Called with the lock held.
func (w *blockWriter) flush(ctx context.Context) error {
	if w.closed {
		return nil
	}
	if err := w.startFlush(ctx); err != nil {
		return err
	}
	return w.waitFlush()
}

// startFlush hands the dirty blocks to a background writer (after the
// previous one finished), so the caller can go on filling new blocks while
// these travel to the datanodes.
func (w *blockWriter) startFlush(ctx context.Context) error {
	if err := w.waitFlush(); err != nil {
		return err
	}
	if len(w.dirty) == 0 {
		if w.resize {
			w.resize = false
			return w.tx.setSize(ctx, w.ino, w.size)
		}
		return nil
	}
	batch, kept, unl, size := w.takeDirty()
	w.inflight, w.inflightUnloaded = batch, unl
	done := make(chan error, 1)
	w.inflightErr = done
	go func() { done <- w.writeBatch(ctx, batch, kept, unl, size) }()
	return nil
}

// takeDirty hands over the dirty blocks (and the size they go with) for
// writing; the writer starts afresh.
func (w *blockWriter) takeDirty() (batch map[uint64][]byte, kept map[uint64]int, unl map[uint64]prefixSource, size int64) {
	batch, kept, unl, size = w.dirty, w.kept, w.unloaded, w.size
	w.dirty, w.kept, w.unloaded = map[uint64][]byte{}, map[uint64]int{}, map[uint64]prefixSource{}
	w.resize = false
	return batch, kept, unl, size
}

// waitFlush waits for the background flush, if any.
func (w *blockWriter) waitFlush() error {
	if w.failed != nil {
		return w.failed
	}
	if w.inflightErr == nil {
		return nil
	}
	err := <-w.inflightErr
	w.inflightErr = nil
	for _, b := range w.inflight {
		putBlockBuf(b)
	}
	w.inflight, w.inflightUnloaded = nil, nil
	w.r.loaded = false // blocks were attached: the reader's list is old
	if err != nil {
		w.failed = err
	}
	return err
}

// writeBatch writes blocks (of a file of the given size) and attaches them
// to the file in the transaction.
func (w *blockWriter) writeBatch(ctx context.Context, batch map[uint64][]byte, kept map[uint64]int, unl map[uint64]prefixSource, size int64) error {
	written, err := w.writeBlocks(ctx, batch, kept, unl, size)
	if err != nil {
		return err
	}
	if _, err := w.tx.call(ctx, w.attachReq(written, size)); err != nil {
		return fmt.Errorf("%s: %w", w.path, err)
	}
	return nil
}

// attachReq is the request that attaches written blocks to the file and
// sets its size.
func (w *blockWriter) attachReq(written []wire.Extent, size int64) *wire.Request {
	q := &wire.Request{Op: wire.OpSetBlocks, Ino: w.ino, Extents: written, Flags: wire.FlagSize, Size: size, Journal: w.journal}
	w.journal = nil
	return q
}

// commitData is what a commit asks of the writer: it waits for the
// background flush, writes the remaining dirty blocks to the datanodes and
// returns the request that attaches them (nil if there is nothing to
// attach), so that the commit can send it together with the commit
// itself, after the datanodes' sync. It takes the lock.
func (w *blockWriter) commitData(ctx context.Context) (*wire.Request, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil, nil
	}
	if err := w.waitFlush(); err != nil {
		return nil, err
	}
	if len(w.dirty) == 0 {
		if w.resize {
			w.resize = false
			return nil, w.tx.setSize(ctx, w.ino, w.size)
		}
		return nil, nil
	}
	batch, kept, unl, size := w.takeDirty()
	written, err := w.writeBlocks(ctx, batch, kept, unl, size)
	for _, b := range batch {
		putBlockBuf(b)
	}
	w.r.loaded = false
	if err != nil {
		w.failed = err
		return nil, err
	}
	return w.attachReq(written, size), nil
}

// drop waits for the background write and drops what is buffered (the
// transaction is being aborted). Called with the lock held.
func (w *blockWriter) drop() {
	w.waitFlush()
	for _, b := range w.dirty {
		putBlockBuf(b)
	}
	w.dirty, w.kept, w.unloaded = map[uint64][]byte{}, map[uint64]int{}, map[uint64]prefixSource{}
}

// writeBlocks writes blocks (of a file of the given size) to the
// datanodes and returns their extents, not yet attached to the file.
func (w *blockWriter) writeBlocks(ctx context.Context, batch map[uint64][]byte, kept map[uint64]int, unl map[uint64]prefixSource, size int64) ([]wire.Extent, error) {
	idxs := make([]uint64, 0, len(batch))
	var written []wire.Extent
	for i := range batch {
		if kept[i] > 0 {
			x, ok, err := w.extendBlock(ctx, i, batch[i], kept[i], size)
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
			if err := w.fetchPrefix(i, src, batch[i]); err != nil {
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
		xs, err := w.writeRange(ctx, batch, size, idxs[i], idxs[i:j])
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
func (w *blockWriter) writeRange(ctx context.Context, batch map[uint64][]byte, size int64, first uint64, idxs []uint64) ([]wire.Extent, error) {
	var exclude []string
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		pref := append([]string(nil), exclude...)
		r, err := w.tx.call(ctx, &wire.Request{Op: wire.OpAllocate, Ino: w.ino, Index: first, Count: uint64(len(idxs)), Pref: pref, Size: size})
		if err != nil {
			if lastErr != nil {
				return nil, fmt.Errorf("%s: %w (after: %v)", w.path, err, lastErr)
			}
			return nil, fmt.Errorf("%s: allocate blocks: %w", w.path, err)
		}
		out := make([]wire.Extent, 0, len(r.Extents))
		failed := false
		for _, x := range r.Extents {
			blocks := make([][]byte, x.Count)
			crcs := make([]uint32, x.Count)
			for k := range blocks {
				idx := x.Index + uint64(k)
				b := batch[idx]
				if end := size - int64(idx)*int64(w.bs); end < int64(w.bs) {
					b = b[:end]
				}
				blocks[k] = b
				crcs[k] = checksum(b, w.bs)
			}
			addrs, starts := w.tx.c.replicaAddrs(x)
			if err := w.writeReplicas(ctx, x, addrs, starts, blocks, crcs); err != nil {
				lastErr = err
				failed = true
				var we *writeError
				// Tickets issued before a datanode's restart (or the
				// namenode's) are refused: not the datanode's fault,
				// the allocation is asked for again, with new tickets.
				if errors.As(err, &we) && !strings.Contains(err.Error(), auth.ErrTicketOutdated.Error()) {
					for _, rp := range x.Replicas {
						info, _ := w.tx.c.node(rp.Node)
						if slices.Contains(we.blame, info.Addr) {
							exclude = append(exclude, "-"+info.Identity)
						}
					}
				}
				break
			}
			w.tx.wroteTo(addrs)
			x.CRC = crcs
			x.Tickets = nil
			out = append(out, x)
		}
		if !failed {
			return out, nil
		}
	}
	return nil, fmt.Errorf("%s: write failed: %w", w.path, lastErr)
}

// writeReplicas writes a run of blocks to every replica of extent x in
// the file's topology: along the chain, or to each replica directly.
func (w *blockWriter) writeReplicas(ctx context.Context, x wire.Extent, addrs []string, starts []uint64, blocks [][]byte, crcs []uint32) error {
	c := w.tx.c
	if w.topology != Star || len(addrs) < 2 {
		first, _ := c.node(x.Replicas[0].Node)
		return c.data.writeRun(ctx, w.tx.reqID(), addrs, starts, x.Tickets, blocks, crcs, w.bs, c.localWriteFile(first, starts[0], ticketAt(x.Tickets, 0)))
	}
	errs := make([]error, len(addrs))
	var wg sync.WaitGroup
	for k := range addrs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, _ := c.node(x.Replicas[k].Node)
			ticket := ticketAt(x.Tickets, k)
			errs[k] = c.data.writeRun(ctx, w.tx.reqID(), addrs[k:k+1], starts[k:k+1], [][]byte{ticket}, blocks, crcs, w.bs, c.localWriteFile(n, starts[k], ticket))
		}()
	}
	wg.Wait()
	// Every replica that failed is to blame (the caller excludes them and
	// allocates again).
	var we writeError
	for _, err := range errs {
		if err == nil {
			continue
		}
		if e, ok := err.(*writeError); ok {
			we.blame = append(we.blame, e.blame...)
		}
		if we.err == nil {
			we.err = err
		} else {
			we.err = fmt.Errorf("%w; %v", we.err, err)
		}
	}
	if we.err != nil {
		return &we
	}
	return nil
}

// Small appends extend the file's last block in place.
//
// Blocks are copy-on-write: a flush writes every dirty block to newly
// allocated blocks. For a small append to a file whose committed last block
// is partly filled that means rewriting the whole block on every replica,
// megabytes for a few bytes. Instead, when the only change to that block
// lies past its committed bytes, the flush asks the namenode for append
// tickets (OpExtend) and sends the datanodes just the new bytes, which they
// write into the block in place (datanode.BlockStore.Extend): the tickets
// allow writing only past the committed length, so a reader of any
// committed version, a prefix of the block, keeps reading it (it checks
// only its prefix, see dataPool.readBlock). When the namenode or a datanode
// refuses, the block is written copy-on-write as before.
//
// Bytes an extension wrote that were never committed stay in the block past
// its committed length. The next append finds the block holding another
// version than the committed one and copies it; growing the file past the
// block by other means (a write further on, a truncate upwards) would
// expose them as file content, so the file then extends or rewrites the
// block first (growing).

// extendBlock writes dirty block idx (buffer b, whose first kept bytes are
// the committed version's) by extending the committed block in place, and
// returns the extent to attach; ok is false when the block must be written
// copy-on-write instead. A conflict (another transaction holds the file)
// is returned: the transaction is retried, rather than copying a block
// that may be extensible once the other one has ended.
func (w *blockWriter) extendBlock(ctx context.Context, idx uint64, b []byte, kept int, size int64) (x wire.Extent, ok bool, err error) {
	valid := int(min(size-int64(idx)*int64(w.bs), int64(w.bs)))
	if valid <= kept {
		return x, false, nil
	}
	r, err := w.tx.call(ctx, &wire.Request{Op: wire.OpExtend, Ino: w.ino, Index: idx})
	if errors.Is(err, ErrConflict) {
		return x, false, fmt.Errorf("%s: %w", w.path, err)
	}
	if err != nil || len(r.Extents) != 1 || len(r.Counters) != 1 {
		return x, false, nil // refused (not the committed partial last block, …)
	}
	x = r.Extents[0]
	from := int(r.Counters[0])
	if x.Index != idx || x.Count != 1 || len(x.CRC) != 1 || len(x.Replicas) == 0 || from <= 0 || from > kept || from >= valid {
		return x, false, nil
	}
	// The committed bytes after from are zeros: the new block is the old
	// one with data placed at from (blockcrc.Placed), so its checksum costs
	// what the append writes. A datanode whose block is not that version
	// refuses. Trailing zeros need not travel: past the data the block reads as
	// zeros (its tail), and a later extension past them writes them out
	// (datanode.BlockStore.Extend). A file grown by a truncate upwards
	// sends nothing.
	data := b[from:valid]
	for len(data) > 0 && data[len(data)-1] == 0 {
		data = data[:len(data)-1]
	}
	crc := x.CRC[0] ^ blockcrc.Placed(from, data, w.bs) ^ blockcrc.ZeroExtend(0, uint64(w.bs))
	addrs, starts := w.tx.c.replicaAddrs(x)
	if err := w.tx.c.data.extend(ctx, w.tx.reqID(), addrs, starts, x.Tickets, from, data, x.CRC[0], crc); err != nil {
		return x, false, nil
	}
	w.wroteExtension(addrs, idx, from, data) // journal.go
	x.CRC = []uint32{crc}
	x.Tickets = nil
	return x, true, nil
}

// growing prepares the file to grow to size: a partly filled last block
// is made dirty as it is (its bytes past the end of the file zeroed, its
// committed bytes left unread where possible: deferPrefix), so the flush
// rewrites or extends it and whatever an extension left past its end,
// never committed, does not become file content. Called with the lock
// held.
func (w *blockWriter) growing(size int64) error {
	if size <= w.size || w.size%int64(w.bs) == 0 {
		return nil
	}
	last := uint64((w.size - 1) / int64(w.bs))
	if w.holds(last) {
		return nil // dirty, or being written: that rewrites it
	}
	valid := int(w.size - int64(last)*int64(w.bs))
	b := getBlockBuf(w.bs, true)
	if !w.deferPrefix(last, int64(valid)) {
		if err := w.r.loadBlocks(); err != nil {
			putBlockBuf(b)
			return err
		}
		if _, _, ok := w.r.locate(last); !ok {
			putBlockBuf(b)
			return nil // a hole
		}
		if err := w.r.readBlock(last, b, false); err != nil {
			putBlockBuf(b)
			return err
		}
		clear(b[valid:])
	}
	w.dirty[last] = b
	w.kept[last] = valid
	return nil
}

// Appends without reading the block they append to.
//
// A write into an existing block normally reads the block first (copy on
// write needs all of it). An append into the file's partly filled last
// block usually extends that block in place (extendBlock), which needs
// only the new bytes, so the committed bytes before them are not read
// then: the dirty buffer holds zeros there and unloaded records where the
// bytes are. Whatever needs the whole block (a read of it, a write before
// the end, a truncate, a flush that has to copy on write after all)
// fetches them first.

// prefixSource is where the committed bytes of a dirty block are: the
// replicas to read and the checksum of the first valid bytes.
type prefixSource struct {
	valid int
	locs  []location
	crc   uint32
	err   error // why there are no locations (the block list was refused)
}

// deferPrefix decides, for a write at in of block idx (not dirty yet,
// before the end of the file), whether the committed bytes can be left
// unread: the write begins at or past the end of the file, in its last
// block, which the replicas hold. It records where they are. Called with
// the lock held.
func (w *blockWriter) deferPrefix(idx uint64, in int64) bool {
	valid := w.size - int64(idx)*int64(w.bs)
	if valid >= int64(w.bs) || in < valid {
		return false
	}
	if _, ok := w.inflight[idx]; ok {
		return false // at hand in memory
	}
	if err := w.waitFlush(); err != nil {
		return false
	}
	if err := w.r.loadBlocks(); err != nil {
		// A file one may write but not read (no block list): an append
		// can still extend its last block, which needs no read; were the
		// extension refused, the bytes could not be fetched (fetchPrefix
		// says so), as a copy could not be read before either.
		w.unloaded[idx] = prefixSource{valid: int(valid), err: err}
		return true
	}
	locs, crc, ok := w.r.locate(idx)
	if !ok {
		return false // a hole reads as zeros without a request
	}
	w.unloaded[idx] = prefixSource{valid: int(valid), locs: locs, crc: crc}
	return true
}

// fetchPrefix reads the committed bytes of a dirty block into its buffer b
// (whose bytes before src.valid were never written). It needs no lock.
func (w *blockWriter) fetchPrefix(idx uint64, src prefixSource, b []byte) error {
	if src.err != nil {
		return fmt.Errorf("%s: block %d must be copied, and its bytes cannot be read: %w", w.path, idx, src.err)
	}
	tmp := getBlockBuf(w.bs, false)
	defer putBlockBuf(tmp)
	if err := w.tx.readReplicas(w.ctx, w.path, w.ino, idx, src.locs, src.crc, tmp, w.bs); err != nil {
		return err
	}
	copy(b[:src.valid], tmp[:src.valid])
	return nil
}

// loadPrefixBefore fetches the committed bytes of dirty block idx if a
// write at in is about to change some of them. Called with the lock held.
func (w *blockWriter) loadPrefixBefore(idx uint64, in int) error {
	if src, ok := w.unloaded[idx]; ok && in < src.valid {
		return w.loadPrefix(idx)
	}
	return nil
}

// loadPrefix fetches the committed bytes of dirty block idx, if they were
// left unread. Called with the lock held.
func (w *blockWriter) loadPrefix(idx uint64) error {
	src, ok := w.unloaded[idx]
	if !ok {
		return nil
	}
	if err := w.fetchPrefix(idx, src, w.dirty[idx]); err != nil {
		return err
	}
	delete(w.unloaded, idx)
	return nil
}

// buffered returns this transaction's bytes of block idx not yet attached
// to the file (dirty, or being written), if any, whole: a prefix left
// unread is fetched, or the write in flight waited for. Called with the
// lock held.
func (w *blockWriter) buffered(idx uint64) ([]byte, bool, error) {
	if b, ok := w.dirty[idx]; ok {
		if err := w.loadPrefix(idx); err != nil {
			return nil, false, err
		}
		return b, true, nil
	}
	if _, ok := w.inflightUnloaded[idx]; ok {
		if err := w.waitFlush(); err != nil {
			return nil, false, err
		}
	}
	if b, ok := w.inflight[idx]; ok {
		return b, true, nil
	}
	return nil, false, nil
}

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
