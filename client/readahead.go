package client

// Read-ahead for sequential readers of a File through ReadAt (the FUSE
// mount and the NFS bridge read a file as a series of ReadAt calls, each
// waiting for the one before): once two reads in a row are sequential, the
// next blocks are fetched in the background, so the datanode round trip
// of block k+1 overlaps the reader's use of block k. WriteTo (plasma get,
// io.Copy) has its own, wider pipeline.

// readAheadBytes bounds what one File fetches ahead.
const readAheadBytes = 4 << 20

// prefetched is a block being read ahead.
type prefetched struct {
	buf  []byte
	err  error
	done chan struct{} // closed when buf and err are set
}

// readAhead notes a read of [start, end) and, if the reader is
// sequential, starts fetching the blocks after end. Called with f.mu held.
func (f *File) readAhead(start, end int64) {
	if start == f.seqEnd && end > start {
		f.seqRun++
	} else {
		f.seqRun = 0
	}
	f.seqEnd = end
	if f.closed {
		return // Close may be waiting for the fetches already started
	}
	bs := int64(f.bs)
	first := uint64(end / bs)
	// Blocks behind the reader are of no use any more.
	for idx := range f.ahead {
		if idx < first {
			delete(f.ahead, idx)
		}
	}
	if f.seqRun < 1 {
		return
	}
	if f.cache != nil && f.cacheIdx == first {
		first++
	}
	n := max(1, readAheadBytes/bs)
	for idx := first; idx < first+uint64(n) && int64(idx)*bs < f.size; idx++ {
		if f.ahead[idx] != nil {
			continue
		}
		if _, ok := f.dirty[idx]; ok {
			continue
		}
		if _, ok := f.inflight[idx]; ok {
			continue
		}
		if f.ahead == nil {
			f.ahead = map[uint64]*prefetched{}
		}
		pf := &prefetched{buf: make([]byte, f.bs), done: make(chan struct{})}
		f.ahead[idx] = pf
		f.aheadWG.Add(1)
		go f.prefetch(idx, pf)
	}
}

// prefetch reads block idx into pf the way readBlock does (buffered
// writes and holes included), without holding f.mu during the read.
func (f *File) prefetch(idx uint64, pf *prefetched) {
	defer f.aheadWG.Done()
	defer close(pf.done)
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		pf.err = errEnded
		return
	}
	locs, crc, done, err := f.source(idx, pf.buf)
	f.mu.Unlock()
	if err != nil || done {
		pf.err = err
		return
	}
	pf.err = f.fetch(idx, locs, crc, pf.buf)
}
