package datanode

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/plasmafs/plasma/internal/auth"
	"github.com/plasmafs/plasma/internal/blockcrc"
)

// In-place extension of committed blocks.
//
// A small append to a file whose last block is partly filled would, by
// copy-on-write, rewrite the whole block on every replica. Instead the
// namenode hands out append tickets for that block (auth.Ticket.Append):
// they allow writing only at offsets at or past the block's committed
// length, so every committed version of the block (each a prefix of the
// current one) keeps its bytes, and a reader of an older version checks
// only its own prefix (ReadPrefix).
//
// An extension applies only to the version it names (base, the checksum
// the block's entry must hold): a request that arrives late, after another
// extension was applied (its transaction ended, its ticket not yet
// revoked), is refused instead of overwriting what the other one wrote and
// committed; so is one after an extension that was never committed (its
// bytes past the committed length, or an entry a power cut tore): the
// client then copies on write, into a clean block. An extension writes
// before its offset only zeros the block's tail already counted, made
// durable before its entry, so a power cut between its data and its entry
// cannot touch committed bytes.

// Extend writes data at offset off of block, which must hold the version
// whose checksum is base (its first off bytes, zero-padded), and records
// crc, the checksum of the result, after checking it: the result is the
// block's first off bytes, then data, then zeros. gen is the generation of
// the append ticket, which must be the block's own (the allocation that
// wrote it); NoTicket skips the check.
//
// seq is the append ticket's sequence number (auth.Ticket.Seq; 0 without
// tickets): refused if the store applied a later one to the block. (The
// server refuses tickets issued before its registration with the
// namenode, writeFloor: the sequence numbers applied are kept in memory
// only, and forgotten by a restart.)
func (s *BlockStore) Extend(block uint64, off int, data []byte, base, crc uint32, gen, seq uint64) error {
	bs := int(s.Config.Blocksize)
	end := off + len(data)
	unlock, stored, have, tail, err := s.lockForPatch("extend of", block, off, len(data))
	if err != nil {
		return err
	}
	defer unlock()
	if gen == NoTicket {
		gen = stored
	} else if gen != stored {
		if stored > gen {
			return staleError(block, stored, gen)
		}
		return fmt.Errorf("%w: block %d holds generation %#x, not the %#x of the allocation the ticket extends", auth.ErrTicketRange, block, stored, gen)
	}
	if gen != NoTicket {
		s.mu.Lock()
		last := s.appendSeq[block]
		s.mu.Unlock()
		if seq < last {
			return fmt.Errorf("%w: append ticket %#x for block %d is older than the last extension of it (%#x)", auth.ErrTicketStale, seq, block, last)
		}
	}
	nOld := bs - int(tail)
	if s.isKept(block) {
		// Released: no version of it is committed anywhere, and what is
		// on disk is the previous owner's (keep.go).
		return fmt.Errorf("%w: block %d of volume %s is empty (released, its pages kept for reuse): copy it instead", ErrChecksum, block, s.Config.Identity)
	}
	if have != base {
		return fmt.Errorf("%w: block %d of volume %s does not hold the version the append extends (checksum %08x, %d bytes): copy it instead", ErrChecksum, block, s.Config.Identity, base, off)
	}
	// The block holds base's bytes before off and zeros after: the result's
	// checksum follows from base and data alone (blockcrc.Placed), so
	// checking it costs what the append writes.
	if got := base ^ blockcrc.Placed(off, data, bs) ^ blockcrc.ZeroExtend(0, uint64(bs)); got != crc {
		return fmt.Errorf("%w: append to block %d received with CRC %08x, sender computed %08x", ErrChecksum, block, got, crc)
	}
	// Zeros after the data up to the end of what is on disk (and of the
	// data's last page). Without data (a file grown by zeros: the writer
	// sends none) the block stays as it is: the zeros past what is on disk
	// are its tail. With data past the tail, the zeros between go to disk
	// too, and are made durable before the entry that counts them is
	// written: a power cut must not leave the block's earlier life there
	// under an entry that says it holds the committed zeros.
	from, n := min(off, nOld), max(nOld, onDisk(end, bs))
	if len(data) == 0 {
		n = nOld
	}
	if n > from {
		buf := make([]byte, n-from)
		copy(buf[off-from:], data)
		at := int64(block)*int64(bs) + int64(from)
		if _, err := s.data.WriteAt(buf, at); err != nil {
			return err
		}
		if from < off {
			if err := s.Sync(); err != nil {
				return err
			}
		} else {
			unix.SyncFileRange(int(s.data.Fd()), at, int64(len(buf)), unix.SYNC_FILE_RANGE_WRITE)
		}
	}
	if gen != NoTicket {
		s.mu.Lock()
		if s.appendSeq == nil {
			s.appendSeq = map[uint64]uint64{}
		}
		s.appendSeq[block] = seq
		s.mu.Unlock()
	}
	return s.record(block, crc, gen, uint32(bs-n))
}

// ReadPrefix reads the first valid bytes of block into buf (len ≥
// blocksize; the rest is zeroed) and checks them against want, the
// checksum of a version of the block that is valid bytes long: a reader
// of a version that was extended since (Extend) checks its own bytes,
// not the newer ones. maxGen is as for Read.
func (s *BlockStore) ReadPrefix(block uint64, buf []byte, maxGen uint64, valid int, want uint32) error {
	bs := int(s.Config.Blocksize)
	if err := s.check(block, 1); err != nil {
		return err
	}
	if valid <= 0 || valid > bs {
		return fmt.Errorf("read of block %d: prefix of %d bytes in a %d-byte block", block, valid, bs)
	}
	s.mu.RLock()
	n := min(valid, bs-int(s.tails[block]))
	s.mu.RUnlock()
	if _, err := s.data.ReadAt(buf[:n], int64(block)*int64(bs)); err != nil {
		return err
	}
	clear(buf[n:bs])
	if gen := s.Gen(block); gen > maxGen {
		clear(buf[:bs])
		return staleError(block, gen, maxGen)
	}
	if got := Checksum(buf[:valid], bs); got != want {
		return fmt.Errorf("%w: block %d of volume %s: its first %d bytes read as %08x, the reader's version has %08x", ErrChecksum, block, s.Config.Identity, valid, got, want)
	}
	return nil
}

// lockForPatch checks that n bytes at off fit block (what names the
// request in the error), locks the block's stripe and returns its unlock
// and the block's recorded generation, checksum and tail: the opening of
// the writes that change a block in place (Extend, ApplyJournal).
func (s *BlockStore) lockForPatch(what string, block uint64, off, n int) (unlock func(), gen uint64, crc, tail uint32, err error) {
	bs := int(s.Config.Blocksize)
	if err := s.check(block, 1); err != nil {
		return nil, 0, 0, 0, err
	}
	if off < 0 || off+n > bs {
		return nil, 0, 0, 0, fmt.Errorf("%s block %d: %d bytes at offset %d do not fit a %d-byte block", what, block, n, off, bs)
	}
	m := s.stripe(block)
	m.Lock()
	s.mu.RLock()
	gen, crc, tail = s.gens[block], s.crcs[block], s.tails[block]
	s.mu.RUnlock()
	return m.Unlock, gen, crc, tail, nil
}
