package datanode

import (
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"sort"

	"golang.org/x/sys/unix"

	"github.com/plasmafs/plasma/internal/wire"
)

// Kept pages (layoutKept): large files keep their sequential speed.
//
// On a sparse volume every block written into a slot whose pages were
// punched costs the filesystem new extents and the kernel new zeroed pages,
// where a fixed volume overwrites pages it allocated long ago: a large put
// ran at 0.55-0.67 of a fixed volume's rate. So a released slot that held
// a whole block keeps its pages: its entry says "empty, pages kept" (the
// tail field's top bit, tailKept, with the tail of what stays on disk) and
// the slot reads as an empty block, whatever its pages hold. The namenode
// learns which slots keep pages (the acknowledgement of a release batch,
// and every registration: slotReport) and gives them to whole blocks
// first, which overwrite them as on a fixed volume.
//
// The previous owner's bytes stay unreachable: the entry says the slot is
// empty, so reads return no byte of it (the tail is the whole block); a new
// block written there punches whatever of the kept pages it does not cover
// before its entry is written (releaseTail), so pages past a block's data
// are holes as on layoutSparse; an extension in place of a kept slot is
// refused (no version of it is committed). A crash before the writer's
// sync can leave an entry and its data disagreeing, as on every layout,
// and the checksum catches it; the block was never committed.
//
// Kept pages are not used bytes: Space does not count them (df and fsstat
// show them free), KeptBytes does (plasma_datanode_kept_bytes). The
// namenode keeps the volume's disk within its capacity by handing out kept
// slots, for any block, once the free bytes not kept run short: a block
// written there takes no more than the kept pages it replaces.

// tailKept marks an entry's tail field as that of an empty slot keeping
// pages; the other bits are the tail of what it keeps (0: a whole block).
const tailKept = 1 << 31

// keeps reports whether the volume keeps released whole blocks' pages.
func (s *BlockStore) keeps() bool { return s.Config.Layout == layoutKept }

// keptEntry decodes an entry's tail field t: the bytes an empty slot keeps
// on disk, and whether it is such an entry.
func (s *BlockStore) keptEntry(t uint32) (uint32, bool) {
	if !s.keeps() || t&tailKept == 0 {
		return 0, false
	}
	tail := t &^ tailKept
	if tail >= s.Config.Blocksize || tail%pageSize != 0 {
		return 0, false // damaged: read as such (the checksum decides)
	}
	return s.Config.Blocksize - tail, true
}

// recordKept writes the entry of block, released, as empty with its first
// kept bytes left on disk. Called with the block's stripe held.
func (s *BlockStore) recordKept(block, gen uint64, kept uint32) error {
	bs := s.Config.Blocksize
	empty := Checksum(nil, int(bs))
	var e [metaEntry]byte
	binary.LittleEndian.PutUint32(e[0:], empty^genMix(gen))
	binary.LittleEndian.PutUint32(e[4:], tailKept|(bs-kept))
	binary.LittleEndian.PutUint64(e[8:], gen)
	if _, err := s.data.WriteAt(e[:], s.metaOff+int64(block)*metaEntry); err != nil {
		return err
	}
	s.mu.Lock()
	s.held -= int64(bs - s.tails[block])
	s.tails[block], s.crcs[block] = bs, empty
	if old, ok := s.kept[block]; ok {
		s.keptBytes -= int64(old)
	}
	s.kept[block] = kept
	s.keptBytes += int64(kept)
	s.mu.Unlock()
	return nil
}

// isKept reports whether block is an empty slot keeping pages.
func (s *BlockStore) isKept(block uint64) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	_, ok := s.kept[block]
	return ok
}

// KeptBytes is what the volume's empty slots keep on disk for reuse (not
// counted by Space).
func (s *BlockStore) KeptBytes() int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.keptBytes
}

// upgradeToKept records that a volume of layoutSparse is now of
// layoutKept: its entries are valid as they are, and none says "kept" yet,
// so the config is all that changes (durably, before any slot keeps
// pages). Interrupted, the volume opens as layout 2 and is upgraded again.
func (s *BlockStore) upgradeToKept(dir string) error {
	cfg := s.Config
	cfg.Layout = layoutKept
	if err := writeConfig(dir, &cfg); err != nil {
		return fmt.Errorf("volume %s: record its upgrade to layout %d (%s): %w", dir, layoutKept, filepath.Join(dir, "config"), err)
	}
	s.Config.Layout = layoutKept
	return nil
}

// maxSlotReport bounds the runs of a slot report: a registration must fit
// a message. Slots past it are reported at a later registration once
// earlier ones are released.
const maxSlotReport = 1 << 18

// slotReport returns the runs of a sparse volume's slots that hold pages,
// for its registration: a block's (Index wire.SlotHolds) and kept ones
// (wire.SlotKept), as extents of one replica (Node 0: the namenode knows
// whose). The namenode releases slots holding pages that no file of its
// own holds (left by transactions a crash ended, or releases it had not
// sent), and hands kept ones to whole blocks first.
func (s *BlockStore) slotReport() []wire.Extent {
	if !s.Sparse() {
		return nil
	}
	bs := s.Config.Blocksize
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []wire.Extent
	add := func(b uint64, state uint64) {
		if k := len(out) - 1; k >= 0 && out[k].Index == state && out[k].Replicas[0].Start+uint64(out[k].Count) == b && out[k].Count < 1<<20 {
			out[k].Count++
			return
		}
		if len(out) < maxSlotReport {
			out = append(out, wire.Extent{Index: state, Count: 1, Replicas: []wire.Run{{Start: b}}})
		}
	}
	for b, t := range s.tails {
		if t < bs {
			add(uint64(b), wire.SlotHolds)
		}
	}
	kept := make([]uint64, 0, len(s.kept))
	for b := range s.kept {
		kept = append(kept, b)
	}
	sort.Slice(kept, func(i, j int) bool { return kept[i] < kept[j] })
	for _, b := range kept {
		add(b, wire.SlotKept)
	}
	return out
}

// keptRuns returns the runs of slots among xs (a release batch) that keep
// their pages now, as extents of one replica (Index wire.SlotKept), for
// the batch's acknowledgement.
func (s *BlockStore) keptRuns(xs []wire.Extent) []wire.Extent {
	s.mu.RLock()
	var slots []uint64
	for _, x := range xs {
		for _, r := range x.Replicas {
			for b := r.Start; b < r.Start+uint64(x.Count); b++ {
				if _, ok := s.kept[b]; ok {
					slots = append(slots, b)
				}
			}
		}
	}
	s.mu.RUnlock()
	sort.Slice(slots, func(i, j int) bool { return slots[i] < slots[j] })
	var out []wire.Extent
	for _, b := range slots {
		if k := len(out) - 1; k >= 0 && out[k].Replicas[0].Start+uint64(out[k].Count) == b {
			out[k].Count++
			continue
		}
		out = append(out, wire.Extent{Index: wire.SlotKept, Count: 1, Replicas: []wire.Run{{Start: b}}})
	}
	return out
}

// trimStray punches the pages of a sparse volume's slots that lie past
// what their entries say is on disk (a block's data, or kept pages): left
// by a process killed between a block's data and its entry (a local
// writer's block not yet adopted, a write or an extension cut short), they
// belong to no block and nobody counts them. Called by OpenBlockStore,
// before the volume serves anything; it walks the data file's allocated
// ranges (SEEK_DATA, SEEK_HOLE), not its slots.
func (s *BlockStore) trimStray() error {
	if !s.Sparse() {
		return nil
	}
	bs := int64(s.Config.Blocksize)
	fd := int(s.data.Fd())
	punched := false
	for off := int64(0); off < s.metaOff; {
		start, err := unix.Seek(fd, off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) || (err == nil && start >= s.metaOff) {
			break
		}
		if err != nil {
			if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EOPNOTSUPP) {
				return nil // a filesystem that cannot say: nothing to trim
			}
			return fmt.Errorf("%s: find its pages: %w", s.data.Name(), err)
		}
		end, err := unix.Seek(fd, start, unix.SEEK_HOLE)
		if err != nil {
			return fmt.Errorf("%s: find its pages: %w", s.data.Name(), err)
		}
		end = min(end, s.metaOff)
		for b := start / bs; b*bs < end; b++ {
			keep := bs - int64(s.tails[b])
			if k, ok := s.kept[uint64(b)]; ok {
				keep = int64(k)
			}
			from, to := max(start, b*bs+keep), min(end, (b+1)*bs)
			if from >= to {
				continue
			}
			err := unix.Fallocate(fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, from, to-from)
			if errors.Is(err, unix.EOPNOTSUPP) {
				return nil // no holes to punch: the pages stay (as on such a filesystem they would anyway)
			}
			if err != nil {
				return fmt.Errorf("%s: release %d stray bytes at %d: %w", s.data.Name(), to-from, from, err)
			}
			punched = true
		}
		off = end
	}
	if punched {
		if err := unix.Fdatasync(fd); err != nil {
			return fmt.Errorf("fdatasync %s: %w", s.data.Name(), err)
		}
	}
	return nil
}
