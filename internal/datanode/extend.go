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
// only its own prefix (ReadPrefix). Bytes an extension wrote but nobody
// committed (the transaction aborted, the client died, a power cut before
// the commit) stay past the committed length, where no reader looks; the
// next extension overwrites them, and a client that grows the file past
// such a block by other means rewrites the block (client.File).

// Extend writes data at offset off of block, which holds the version whose
// checksum is base (its first off bytes, zero-padded), and records crc,
// the checksum of the result, after checking it: the result is the block's
// first off bytes, then data, then zeros. gen is the generation of the
// append ticket, which must be the block's own (the allocation that wrote
// it); NoTicket skips the check.
func (s *BlockStore) Extend(block uint64, off int, data []byte, base, crc uint32, gen uint64) error {
	bs := int(s.Config.Blocksize)
	if err := s.check(block, 1); err != nil {
		return err
	}
	end := off + len(data)
	if off < 0 || end > bs {
		return fmt.Errorf("extend of block %d: %d bytes at offset %d do not fit a %d-byte block", block, len(data), off, bs)
	}
	m := s.stripe(block)
	m.Lock()
	defer m.Unlock()
	s.mu.RLock()
	stored, have, tail := s.gens[block], s.crcs[block], s.tails[block]
	s.mu.RUnlock()
	if gen == NoTicket {
		gen = stored
	} else if gen != stored {
		if stored > gen {
			return staleError(block, stored, gen)
		}
		return fmt.Errorf("%w: block %d holds generation %#x, not the %#x of the allocation the ticket extends", auth.ErrTicketRange, block, stored, gen)
	}
	nOld := bs - int(tail)
	at := int64(block) * int64(bs)
	// The bytes the extension replaces, [off, nOld): usually less than a
	// page (the zeros after the last append), so checking the result costs
	// what the append writes.
	var old []byte
	if nOld > off {
		old = make([]byte, nOld-off)
		if _, err := s.data.ReadAt(old, at+int64(off)); err != nil {
			return err
		}
	}
	got := have ^ blockcrc.Placed(off, old, bs) ^ blockcrc.Placed(off, data, bs)
	if got != crc {
		// The recorded checksum does not lead to the writer's: bytes past
		// the committed length from an extension that was not committed
		// (whose entry may be torn), or another version. Check the
		// committed prefix itself.
		c, err := s.prefixCRC(block, min(off, nOld))
		if err != nil {
			return err
		}
		c = blockcrc.ZeroExtend(c, uint64(off-min(off, nOld)))
		if blockcrc.ZeroExtend(c, uint64(bs-off)) != base {
			return fmt.Errorf("%w: block %d of volume %s does not hold the version the append extends (its first %d bytes, checksum %08x)", ErrChecksum, block, s.Config.Identity, off, base)
		}
		got = blockcrc.ZeroExtend(blockcrc.Update(c, data), uint64(bs-end))
		if got != crc {
			return fmt.Errorf("%w: append to block %d received with CRC %08x, sender computed %08x", ErrChecksum, block, got, crc)
		}
	}
	// Zeros after the data up to the end of what is on disk (and of the
	// data's last page): nothing of an earlier, uncommitted extension stays.
	// Zeros before it too, from the end of what was on disk: those bytes
	// read as zeros until now, whatever the disk held. Without data (a
	// file grown by zeros: the writer sends none) only what was on disk
	// past off is cleared, and the block stays as short as it was.
	from, n := min(off, nOld), nOld
	if len(data) > 0 {
		n = max(nOld, onDisk(end, bs))
	}
	if n > from {
		buf := make([]byte, n-from)
		copy(buf[off-from:], data)
		if _, err := s.data.WriteAt(buf, at+int64(from)); err != nil {
			return err
		}
		unix.SyncFileRange(int(s.data.Fd()), at+int64(from), int64(len(buf)), unix.SYNC_FILE_RANGE_WRITE)
	}
	return s.record(block, crc, gen, uint32(bs-n))
}

// prefixCRC returns the CRC32C of block's first n bytes (not padded).
func (s *BlockStore) prefixCRC(block uint64, n int) (uint32, error) {
	buf := make([]byte, n)
	if _, err := s.data.ReadAt(buf, int64(block)*int64(s.Config.Blocksize)); err != nil {
		return 0, err
	}
	return blockcrc.Update(0, buf), nil
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
