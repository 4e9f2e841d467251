package datanode

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Sparse volumes (layoutSparse): small files cost what they hold.
//
// A volume of the fixed layouts has one slot per whole block of its size,
// so every block, however short, takes a slot: a tree of small files ran
// out of slots at a fraction of the volume's bytes. A sparse volume has
// many more slots than whole blocks fit (Capacity / slot bytes, by default
// one per 4 KiB page) in a sparse data file: a block's slot is a range of
// the file's offsets, and only the pages its data covers are on disk
// (short blocks write no more). The namenode allocates slots as before
// but admits allocations by bytes: each datanode reports its capacity and
// the bytes its blocks hold (Used, the sum of their pages) with its
// heartbeats.
//
// Space comes back two ways: the namenode tells a datanode which freed
// slots to release (heartbeat answers; the slots stay taken on the
// namenode until the datanode confirms), and the datanode punches their
// pages out of the file (fallocate PUNCH_HOLE); a slot rewritten with a
// shorter block releases its old tail at once.

// DefaultSlotBytes is the capacity per slot of a sparse volume: one slot
// per page, so a volume runs out of bytes before it runs out of slots
// however small its files.
const DefaultSlotBytes = 4096

// maxSparseFile bounds a sparse volume's data file: ext4 with 4 KiB blocks
// allows 16 TiB files. Volumes whose slots would need more get fewer
// slots (InitSparse).
const maxSparseFile = 16<<40 - 1<<30

// InitSparse creates a sparse volume (layoutKept) in dir holding size bytes,
// with one slot per slotBytes of it (at least one per whole block; fewer
// if the data file would pass maxSparseFile): an empty sparse data file of
// the slots followed by their entries, each marking its slot empty.
func InitSparse(dir, cluster string, blocksize uint32, size int64, slotBytes int64) (*VolumeConfig, error) {
	if err := checkBlocksize(blocksize); err != nil {
		return nil, err
	}
	if cluster == "" {
		return nil, errors.New("cluster name is empty")
	}
	if size <= 0 || size < int64(blocksize) {
		return nil, fmt.Errorf("size %d is smaller than one block (%d bytes)", size, blocksize)
	}
	if slotBytes < pageSize || slotBytes > int64(blocksize) {
		return nil, fmt.Errorf("slot bytes %d: must be between a page (%d) and the blocksize (%d)", slotBytes, pageSize, blocksize)
	}
	whole := uint64(size) / uint64(blocksize)
	slots := max(uint64(size)/uint64(slotBytes), whole)
	if most := uint64(maxSparseFile) / (uint64(blocksize) + metaEntry); slots > most {
		slots = max(most, whole)
	}
	cfg, err := prepareVolumeDir(dir, cluster, blocksize, slots)
	if err != nil {
		return nil, err
	}
	cfg.Layout, cfg.Capacity = layoutKept, size
	path := filepath.Join(dir, "data")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	err = writeEmptyEntries(f, slots, blocksize)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	if err := writeConfig(dir, cfg); err != nil {
		return nil, err
	}
	return cfg, nil
}

// writeEmptyEntries sizes f for slots of blocksize bytes and their entries
// and writes the entries of empty slots: the whole block is tail, the
// checksum that of zeros, generation 0.
func writeEmptyEntries(f *os.File, slots uint64, blocksize uint32) error {
	metaOff := int64(slots) * int64(blocksize)
	if err := f.Truncate(metaOff + int64(slots)*metaEntry); err != nil {
		return err
	}
	var e [metaEntry]byte
	binary.LittleEndian.PutUint32(e[0:], Checksum(nil, int(blocksize)))
	binary.LittleEndian.PutUint32(e[4:], blocksize)
	chunk := make([]byte, 0, 1<<20)
	for len(chunk) < cap(chunk) {
		chunk = append(chunk, e[:]...)
	}
	for i := uint64(0); i < slots; {
		k := min(slots-i, uint64(len(chunk)/metaEntry))
		if _, err := f.WriteAt(chunk[:k*metaEntry], metaOff+int64(i)*metaEntry); err != nil {
			return err
		}
		i += k
	}
	return nil
}

// Sparse reports whether the volume is sparse (layoutSparse or
// layoutKept).
func (s *BlockStore) Sparse() bool {
	return s.Config.Layout == layoutSparse || s.Config.Layout == layoutKept
}

// Space returns the bytes the volume may hold and those its blocks held
// (pages on disk) when the last Sync began. A volume of a fixed layout
// holds Blocks whole blocks and reports capacity 0: its slots are its
// space.
//
// Blocks written since are not counted: a writer syncs before it
// commits, and until then the namenode counts the blocks it allocated
// (namenode/space.go); counting them here too would count a large file
// being written twice.
func (s *BlockStore) Space() (capacity, used int64) {
	if !s.Sparse() {
		return 0, 0
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.Config.Capacity, s.synced
}

// punch deallocates length bytes of the data file at off (they read as
// zeros afterwards).
func (s *BlockStore) punch(off, length int64) error {
	if length <= 0 {
		return nil
	}
	err := unix.Fallocate(int(s.data.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, length)
	if errors.Is(err, unix.EOPNOTSUPP) {
		// A filesystem without holes to punch: the bytes read as zeros
		// all the same, but keep their space.
		for err = nil; length > 0 && err == nil; {
			k := min(length, int64(len(zeros)))
			_, err = s.data.WriteAt(zeros[:k], off)
			off, length = off+k, length-k
		}
	}
	if err != nil {
		return fmt.Errorf("%s: release %d bytes at %d: %w", s.data.Name(), length, off, err)
	}
	return nil
}

// releaseTail punches out the pages of block past its first n bytes that
// its previous content held, so a slot rewritten with a shorter block
// takes only its new pages. Sparse volumes only (a fixed volume keeps its
// space reserved). Called with the block's stripe held.
func (s *BlockStore) releaseTail(block uint64, n int) error {
	if !s.Sparse() {
		return nil
	}
	bs := int(s.Config.Blocksize)
	s.mu.RLock()
	// A slot keeping a released block's pages (keep.go) has them on disk
	// under an empty entry: what the new block does not cover goes.
	had := max(bs-int(s.tails[block]), int(s.kept[block]))
	s.mu.RUnlock()
	if had <= n {
		return nil
	}
	return s.punch(int64(block)*int64(bs)+int64(n), int64(had-n))
}

// Release empties count slots from block, which the namenode freed: their
// entries mark them empty (their generations stay: a slot never goes back
// to an older one) and their pages are punched out of the file, except a
// whole block's on a volume of layoutKept, which stay for the slot's next
// owner (keep.go). A volume of a fixed layout keeps its blocks as they
// are. The change is durable once Sync returns.
func (s *BlockStore) Release(block, count uint64) error {
	if !s.Sparse() {
		return nil
	}
	if err := s.check(block, count); err != nil {
		return err
	}
	bs := s.Config.Blocksize
	empty := Checksum(nil, int(bs))
	for b := block; b < block+count; b++ {
		if err := s.release1(b, bs, empty); err != nil {
			return err
		}
	}
	return nil
}

func (s *BlockStore) release1(b uint64, bs uint32, empty uint32) error {
	m := s.stripe(b)
	m.Lock()
	defer m.Unlock()
	s.mu.Lock()
	tail, gen := s.tails[b], s.gens[b]
	_, kept := s.kept[b]
	delete(s.appendSeq, b)
	s.mu.Unlock()
	switch {
	case tail == bs || kept:
		return nil // empty already
	case tail == 0 && s.keeps():
		return s.recordKept(b, gen, bs)
	}
	// The whole slot: pages past the entry's tail may be left by a write
	// whose punch a crash lost (the block was never committed).
	if err := s.punch(int64(b)*int64(bs), int64(bs)); err != nil {
		return err
	}
	return s.record(b, empty, gen, bs)
}

// onDiskBytes is what block holds on disk (its pages; the scrubber paces
// itself by them).
func (s *BlockStore) onDiskBytes(block uint64) int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return int64(s.Config.Blocksize) - int64(s.tails[block])
}
