package client

import "fmt"

// Appends without reading the block they append to.
//
// A write into an existing block normally reads the block first (copy on
// write needs all of it). An append into the file's partly filled last
// block usually extends that block in place (extend.go), which needs only
// the new bytes, so the committed bytes before them are not read then: the
// dirty buffer holds zeros there and unloaded records where the bytes are.
// Whatever needs the whole block (a read of it, a write before the end, a
// truncate, a flush that has to copy on write after all) fetches them
// first.

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
// f.mu held.
func (f *File) deferPrefix(idx uint64, in int64) bool {
	valid := f.size - int64(idx)*int64(f.bs)
	if valid >= int64(f.bs) || in < valid {
		return false
	}
	if _, ok := f.inflight[idx]; ok {
		return false // at hand in memory
	}
	if err := f.waitFlush(); err != nil {
		return false
	}
	if err := f.loadBlocks(); err != nil {
		// A file one may write but not read (no block list): an append
		// can still extend its last block, which needs no read; were the
		// extension refused, the bytes could not be fetched (fetchPrefix
		// says so), as a copy could not be read before either.
		f.unloaded[idx] = prefixSource{valid: int(valid), err: err}
		return true
	}
	locs, crc, ok := f.locate(idx)
	if !ok {
		return false // a hole reads as zeros without a request
	}
	f.unloaded[idx] = prefixSource{valid: int(valid), locs: locs, crc: crc}
	return true
}

// fetchPrefix reads the committed bytes of a dirty block into its buffer b
// (whose bytes before src.valid were never written). It needs no lock.
func (f *File) fetchPrefix(idx uint64, src prefixSource, b []byte) error {
	if src.err != nil {
		return fmt.Errorf("%s: block %d must be copied, and its bytes cannot be read: %w", f.path, idx, src.err)
	}
	tmp := getBlockBuf(f.bs, false)
	defer putBlockBuf(tmp)
	if err := f.fetch(idx, src.locs, src.crc, tmp); err != nil {
		return err
	}
	copy(b[:src.valid], tmp[:src.valid])
	return nil
}

// loadPrefixBefore fetches the committed bytes of dirty block idx if a
// write at in is about to change some of them. Called with f.mu held.
func (f *File) loadPrefixBefore(idx uint64, in int) error {
	if src, ok := f.unloaded[idx]; ok && in < src.valid {
		return f.loadPrefix(idx)
	}
	return nil
}

// loadPrefix fetches the committed bytes of dirty block idx, if they were
// left unread. Called with f.mu held.
func (f *File) loadPrefix(idx uint64) error {
	src, ok := f.unloaded[idx]
	if !ok {
		return nil
	}
	if err := f.fetchPrefix(idx, src, f.dirty[idx]); err != nil {
		return err
	}
	delete(f.unloaded, idx)
	return nil
}

// buffered returns this transaction's bytes of block idx not yet attached
// to the file (dirty, or being written), if any, whole: a prefix left
// unread is fetched, or the write in flight waited for. Called with f.mu
// held.
func (f *File) buffered(idx uint64) ([]byte, bool, error) {
	if b, ok := f.dirty[idx]; ok {
		if err := f.loadPrefix(idx); err != nil {
			return nil, false, err
		}
		return b, true, nil
	}
	if _, ok := f.inflightUnloaded[idx]; ok {
		if err := f.waitFlush(); err != nil {
			return nil, false, err
		}
	}
	if b, ok := f.inflight[idx]; ok {
		return b, true, nil
	}
	return nil, false, nil
}
