package datanode

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/plasmafs/plasma/internal/auth"
	"github.com/plasmafs/plasma/internal/blockcrc"
)

// Checksum returns the CRC32C of a block whose first len(data) bytes are
// data and the rest (up to blocksize) zeros.
func Checksum(data []byte, blocksize int) uint32 { return blockcrc.Checksum(data, blocksize) }

var zeros = make([]byte, 1<<20)

// VolumeConfig is the content of a volume's config file.
type VolumeConfig struct {
	Identity  string `json:"identity"`
	Cluster   string `json:"cluster"`
	Blocksize uint32 `json:"blocksize"`
	Blocks    uint64 `json:"blocks"`
	// Namespace is the id of the namespace (the namenode's database) the
	// volume joined first; it refuses any other. Empty until then.
	Namespace string `json:"namespace,omitempty"`
	// Layout says where the per-block entries are (see BlockStore).
	Layout int `json:"layout,omitempty"`
	// Capacity is the bytes a volume of layoutSparse may hold; its Blocks
	// are slots, many more than fit (sparse.go). 0 in other layouts: the
	// volume holds Blocks whole blocks.
	Capacity int64 `json:"capacity,omitempty"`
}

// Volume layouts.
const (
	// layoutFiles: checksums, generations and tails in the files crc, gen
	// and tail beside data. Volumes made before layoutInline; opening one
	// converts it.
	layoutFiles = 0
	// layoutInline: one entry per block in a region of the data file
	// after the blocks.
	layoutInline = 1
	// layoutSparse: as layoutInline, but the data file is sparse and has
	// many more slots than its capacity holds whole blocks; a block takes
	// the pages it holds (sparse.go).
	layoutSparse = 2
	// layoutKept: as layoutSparse, and an entry may also say "empty, its
	// pages kept" (keep.go): a released whole block's pages stay on disk
	// for the slot's next owner. Layout-2 volumes are upgraded at open
	// (their entries are valid as they are); programs that know only
	// layout 2 refuse it, as they would read a kept slot as damaged.
	layoutKept = 3
)

// metaEntry is the size of a block's entry: its CRC32C XOR genMix(gen)
// (4 bytes), its tail (4) and its generation (8), little-endian.
const metaEntry = 16

// Preallocation says how Init reserves the data file's space.
type Preallocation int

const (
	// PreallocZero writes zeros over the whole file: slow to initialise,
	// but block writes later cost no more than overwriting a file. This
	// is the default.
	PreallocZero Preallocation = iota
	// PreallocFallocate reserves space with fallocate: instant, but on
	// ext4 every first write of a block converts an unwritten extent, which
	// made writes about three times slower here.
	PreallocFallocate
	// PreallocSparse makes a volume of layoutSparse: nothing is reserved,
	// a block takes only the pages it holds (sparse.go).
	PreallocSparse
)

// Init creates a volume in dir: a new identity, the config file and a
// preallocated data file of size bytes (rounded down to whole blocks) plus
// the region of the blocks' entries (16 bytes per block).
func Init(dir, cluster string, blocksize uint32, size int64) (*VolumeConfig, error) {
	return InitWith(dir, cluster, blocksize, size, PreallocZero)
}

// InitWith is Init with a choice of preallocation.
func InitWith(dir, cluster string, blocksize uint32, size int64, how Preallocation) (*VolumeConfig, error) {
	if how == PreallocSparse {
		return InitSparse(dir, cluster, blocksize, size, DefaultSlotBytes)
	}
	if err := checkBlocksize(blocksize); err != nil {
		return nil, err
	}
	if cluster == "" {
		return nil, errors.New("cluster name is empty")
	}
	blocks := uint64(size) / uint64(blocksize)
	if size <= 0 || blocks == 0 {
		return nil, fmt.Errorf("size %d is smaller than one block (%d bytes)", size, blocksize)
	}
	cfg, err := prepareVolumeDir(dir, cluster, blocksize, blocks)
	if err != nil {
		return nil, err
	}
	for _, f := range []struct {
		name string
		size int64
	}{{"data", int64(blocks)*int64(blocksize) + int64(blocks)*metaEntry}} {
		fh, err := os.OpenFile(filepath.Join(dir, f.name), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return nil, err
		}
		if how == PreallocZero {
			err = writeZeros(fh, f.size)
		} else if err = unix.Fallocate(int(fh.Fd()), 0, 0, f.size); err != nil {
			// Filesystems without fallocate: a sparse file still works.
			err = fh.Truncate(f.size)
		}
		if err == nil {
			err = fh.Sync()
		}
		fh.Close()
		if err != nil {
			return nil, fmt.Errorf("preallocate %s: %w", f.name, err)
		}
	}
	if err := writeConfig(dir, cfg); err != nil {
		return nil, err
	}
	return cfg, nil
}

func checkBlocksize(blocksize uint32) error {
	if blocksize < 4096 || blocksize > 64<<20 || blocksize&(blocksize-1) != 0 {
		return fmt.Errorf("blocksize %d: must be a power of two between 4 KiB and 64 MiB", blocksize)
	}
	return nil
}

// prepareVolumeDir makes dir ready for a new volume's files (refusing one
// that holds a volume) and returns its config, of layoutInline with a new
// identity.
func prepareVolumeDir(dir, cluster string, blocksize uint32, blocks uint64) (*VolumeConfig, error) {
	if _, err := os.Stat(filepath.Join(dir, "config")); err == nil {
		return nil, fmt.Errorf("%s already holds a datanode volume (config exists)", dir)
	}
	// Without a config (written last) the volume was never complete: what
	// is there is left from an init that was interrupted (Ctrl-C during
	// the zeroing) and never served; it is made again.
	for _, name := range []string{"data", "crc", "gen", "tail", "config.tmp"} {
		if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s: remove %s left by an interrupted init: %w", dir, name, err)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	// The volume directory may be new: its entry must survive a power cut
	// like the files in it (writeConfig syncs the directory itself).
	if err := syncDir(filepath.Dir(filepath.Clean(dir))); err != nil {
		return nil, err
	}
	id := make([]byte, 16)
	if _, err := rand.Read(id); err != nil {
		return nil, err
	}
	return &VolumeConfig{Identity: hex.EncodeToString(id), Cluster: cluster, Blocksize: blocksize, Blocks: blocks, Layout: layoutInline}, nil
}

// writeConfig replaces the volume's config file durably: a temporary file,
// fsynced, renamed over it, and the directory fsynced.
func writeConfig(dir string, cfg *VolumeConfig) error {
	b, _ := json.MarshalIndent(cfg, "", "  ")
	tmp := filepath.Join(dir, "config.tmp")
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "config")); err != nil {
		return err
	}
	return syncDir(dir)
}

func writeZeros(f *os.File, size int64) error {
	buf := make([]byte, 4<<20)
	for off := int64(0); off < size; {
		n := int(min(int64(len(buf)), size-off))
		if _, err := f.WriteAt(buf[:n], off); err != nil {
			return err
		}
		off += int64(n)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// BlockStore is one volume's blocks, checksums and generations. Safe for
// concurrent use.
//
// Each block has an entry (metaEntry bytes) in a region of the data file
// after the blocks: its checksum, generation and tail. Keeping them in the
// data file makes a block and its entry durable with one fdatasync (with
// separate files, four: on the loop-mounted ext4 here a short write plus
// Sync took 466 µs that way and 234 µs with one file).
//
// Short blocks: a block is logically blocksize bytes, zero after its data.
// Only the data, rounded up to whole 4 KiB pages, is written; the tail in
// its entry records how many bytes at the block's end were not written
// and read as zeros (0: the whole block is on disk). A small file, or
// the last block of one, then costs the disk what it holds, not a whole
// block: appending 64 bytes and committing writes and syncs one page per
// replica instead of a megabyte. The tail entry is made durable with the
// block by Sync; until then the block is not committed anywhere, so a
// power cut that tears the entries can only hit a block nobody refers to
// (and the checksum still catches it).
//
// A block's generation is the one of the write ticket that last wrote it
// (0: never written with a ticket, or written before volumes had
// generations). A write with an older generation is refused, and so is a
// read with a ticket older than the block: see auth.Ticket. The
// generation is made durable with the block by Sync.
//
// Torn writes: the entry holds the block's CRC32C XOR genMix(its
// generation), so checksum and generation only verify together. An entry
// is one 16-byte write within a sector, so it is not torn in itself; the
// binding dates from volumes that kept the two in separate files, written
// back independently (genMix(0) is 0: a volume from before generations
// needs no conversion of its checksums).
type BlockStore struct {
	Config VolumeConfig
	cfgMu  sync.Mutex // serialises config rewrites
	data   *os.File
	// metaOff is where the entries begin in data (after the blocks).
	metaOff int64
	mu      sync.RWMutex
	crcs    []uint32 // CRC32C of each block (not XORed)
	gens    []uint64
	tails   []uint32 // zero bytes at each block's end that are not on disk
	// held is the sum over blocks of their bytes on disk (blocksize less
	// tail): what a volume of layoutSparse uses (sparse.go); synced is
	// what it was when the last Sync began, what Space reports. Under mu.
	held, synced int64
	// kept: slots of layoutKept that are empty but keep the pages of the
	// block released there, with their bytes on disk; keptBytes their
	// sum (keep.go). Under mu.
	kept      map[uint64]uint32
	keptBytes int64
	// Extensions in place (extend.go): the last append ticket applied to
	// each block.
	appendSeq map[uint64]uint64
	// Writes of one block are serialised (the generation check, the data
	// and the checksum go together); blocks share stripes.
	stripes [64]sync.Mutex
	// badChecksums counts blocks received or read whose data did not
	// match their checksum.
	badChecksums atomic.Uint64
}

// NoTicket, as the generation of a write, stores the block without
// checking or changing its generation; as the generation of a read, allows
// any. Datanodes without a ticket key (security level none) use it.
const NoTicket = ^uint64(0)

// ErrChecksum reports a block whose content does not match its checksum.
var ErrChecksum = errors.New("checksum mismatch")

// genMix spreads a generation over 32 bits, for binding the checksum entry
// to the generation entry (genMix(0) = 0).
func genMix(g uint64) uint32 {
	h := g * 0x9e3779b97f4a7c15
	return uint32(h ^ h>>32)
}

func (s *BlockStore) stripe(block uint64) *sync.Mutex {
	return &s.stripes[block%uint64(len(s.stripes))]
}

// staleError reports a request whose ticket is older than a block.
func staleError(block, stored, ticket uint64) error {
	return fmt.Errorf("%w: block %d holds generation %#x, the ticket %#x", auth.ErrTicketStale, block, stored, ticket)
}

// OpenBlockStore opens the volume in dir (converting one of the old
// layout). A damaged volume (config unreadable, data file missing or
// shorter than the config says) is refused with an error naming the file.
func OpenBlockStore(dir string) (*BlockStore, error) {
	cfgPath := filepath.Join(dir, "config")
	b, err := os.ReadFile(cfgPath)
	if err != nil {
		return nil, fmt.Errorf("%s is not a datanode volume (run 'plasma datanode init'): %w", dir, err)
	}
	s := &BlockStore{}
	switch err := json.Unmarshal(b, &s.Config); {
	case len(b) == 0:
		return nil, fmt.Errorf("%s is empty (truncated): the volume is damaged", cfgPath)
	case err != nil:
		return nil, fmt.Errorf("%s/config is corrupt (truncated or overwritten?): %v", dir, err)
	case s.Config.Identity == "" || s.Config.Blocksize == 0 || s.Config.Blocksize&(s.Config.Blocksize-1) != 0 ||
		s.Config.Blocks == 0 || s.Config.Blocks > math.MaxInt64/(uint64(s.Config.Blocksize)+metaEntry):
		return nil, fmt.Errorf("%s/config is corrupt: identity %q, %d blocks of %d bytes", dir, s.Config.Identity, s.Config.Blocks, s.Config.Blocksize)
	}
	dataPath := filepath.Join(dir, "data")
	if s.data, err = os.OpenFile(dataPath, os.O_RDWR, 0); err != nil {
		return nil, fmt.Errorf("datanode volume %s is damaged: %w", dir, err)
	}
	n := s.Config.Blocks
	s.metaOff = int64(n) * int64(s.Config.Blocksize)
	switch s.Config.Layout {
	case layoutFiles:
		if err := s.convert(dir); err != nil {
			s.data.Close()
			return nil, err
		}
	case layoutSparse, layoutKept:
		if s.Config.Capacity <= 0 {
			s.data.Close()
			return nil, fmt.Errorf("%s/config is corrupt: a sparse volume without its capacity", dir)
		}
	case layoutInline:
		// Left by a conversion interrupted after its config was written.
		for _, name := range []string{"crc", "gen", "tail"} {
			os.Remove(filepath.Join(dir, name))
		}
	default:
		s.data.Close()
		return nil, fmt.Errorf("%s: volume layout %d is newer than this version of plasma knows (up to %d): upgrade plasma", cfgPath, s.Config.Layout, layoutKept)
	}
	st, err := s.data.Stat()
	if err != nil {
		s.data.Close()
		return nil, fmt.Errorf("%s: %w", dataPath, err)
	}
	if want := s.metaOff + int64(n)*metaEntry; st.Size() < want {
		s.data.Close()
		return nil, fmt.Errorf("%s is truncated: %d bytes, but %d blocks of %d bytes and their entries (as %s says) need %d: the volume is damaged", dataPath, st.Size(), n, s.Config.Blocksize, cfgPath, want)
	}
	s.crcs, s.gens, s.tails = make([]uint32, n), make([]uint64, n), make([]uint32, n)
	s.kept = map[uint64]uint32{}
	chunk := make([]byte, metaEntry<<14)
	for i := uint64(0); i < n; {
		k := min(n-i, uint64(len(chunk)/metaEntry))
		if _, err := s.data.ReadAt(chunk[:k*metaEntry], s.metaOff+int64(i)*metaEntry); err != nil {
			s.data.Close()
			return nil, fmt.Errorf("%s: read block entries: %w", dataPath, err)
		}
		for j := uint64(0); j < k; j++ {
			e := chunk[j*metaEntry:]
			gen := binary.LittleEndian.Uint64(e[8:])
			t := binary.LittleEndian.Uint32(e[4:])
			if k, ok := s.keptEntry(t); ok {
				s.kept[i+j] = k
				s.keptBytes += int64(k)
				t = s.Config.Blocksize
			}
			if t > s.Config.Blocksize || t%pageSize != 0 {
				t = 0 // damaged entry: read the whole block (the checksum decides)
			}
			s.crcs[i+j] = binary.LittleEndian.Uint32(e) ^ genMix(gen)
			s.gens[i+j], s.tails[i+j] = gen, t
			s.held += int64(s.Config.Blocksize - t)
		}
		i += k
	}
	s.synced = s.held
	if err := s.trimStray(); err != nil {
		s.data.Close()
		return nil, err
	}
	if s.Config.Layout == layoutSparse {
		if err := s.upgradeToKept(dir); err != nil {
			s.data.Close()
			return nil, err
		}
	}
	return s, nil
}

// convert turns a volume of layoutFiles into layoutInline: the entries
// from the files crc, gen (if there: volumes from before generations have
// none) and tail (likewise) are written after the blocks in data and made
// durable, then the config says so, then the old files go. Interrupted
// anywhere, it is done again at the next open.
func (s *BlockStore) convert(dir string) error {
	n := s.Config.Blocks
	dataPath := filepath.Join(dir, "data")
	st, err := s.data.Stat()
	if err != nil {
		return fmt.Errorf("%s: %w", dataPath, err)
	}
	if st.Size() < s.metaOff {
		return fmt.Errorf("%s is truncated: %d bytes, but %d blocks of %d bytes (as %s says) need %d: the volume is damaged", dataPath, st.Size(), n, s.Config.Blocksize, filepath.Join(dir, "config"), s.metaOff)
	}
	legacy := func(name string, size uint64, required bool) ([]byte, error) {
		path := filepath.Join(dir, name)
		b, err := os.ReadFile(path)
		switch {
		case errors.Is(err, fs.ErrNotExist) && !required:
			return make([]byte, size), nil
		case err != nil:
			return nil, fmt.Errorf("datanode volume %s is damaged: %w", dir, err)
		case uint64(len(b)) < size:
			return nil, fmt.Errorf("%s is truncated: %d bytes, but the entries of %d blocks need %d: the volume is damaged", path, len(b), n, size)
		}
		return b, nil
	}
	crcs, err := legacy("crc", 4*n, true)
	if err != nil {
		return err
	}
	gens, err := legacy("gen", 8*n, false)
	if err != nil {
		return err
	}
	tails, err := legacy("tail", 4*n, false)
	if err != nil {
		return err
	}
	region := make([]byte, n*metaEntry)
	for i := uint64(0); i < n; i++ {
		e := region[i*metaEntry:]
		copy(e[0:4], crcs[4*i:])
		copy(e[4:8], tails[4*i:])
		copy(e[8:16], gens[8*i:])
	}
	if _, err := s.data.WriteAt(region, s.metaOff); err != nil {
		return fmt.Errorf("%s: write block entries: %w", dataPath, err)
	}
	if err := s.data.Sync(); err != nil {
		return fmt.Errorf("%s: %w", dataPath, err)
	}
	cfg := s.Config
	cfg.Layout = layoutInline
	if err := writeConfig(dir, &cfg); err != nil {
		return fmt.Errorf("volume %s: record its new layout: %w", dir, err)
	}
	s.Config.Layout = layoutInline
	for _, name := range []string{"crc", "gen", "tail"} {
		os.Remove(filepath.Join(dir, name))
	}
	return syncDir(dir)
}

// JoinNamespace checks the namespace id of the namenode the volume in dir
// is joining: a volume that never joined one records it (durably, before
// it serves any block of that namespace); one that belongs to another
// namespace refuses it.
func (s *BlockStore) JoinNamespace(dir, ns, namenode string) error {
	s.cfgMu.Lock()
	defer s.cfgMu.Unlock()
	if ns == "" || ns == s.Config.Namespace {
		return nil
	}
	if s.Config.Namespace != "" {
		return &NamespaceError{Dir: dir, Volume: s.Config.Namespace, Namenode: ns, Addr: namenode}
	}
	cfg := s.Config
	cfg.Namespace = ns
	if err := writeConfig(dir, &cfg); err != nil {
		return fmt.Errorf("volume %s: record namespace %s: %w", dir, ns, err)
	}
	s.Config.Namespace = ns
	return nil
}

// NamespaceError is a volume refusing to join a namenode of another
// namespace.
type NamespaceError struct {
	Dir, Volume, Namenode, Addr string
}

func (e *NamespaceError) Error() string {
	return fmt.Sprintf("volume %s belongs to namespace %s, but the namenode at %s serves namespace %s: "+
		"its database was replaced or formatted anew, and joining would make this volume's blocks free space. "+
		"Restore the namenode's database (or a backup of it) and restart it; or, to reuse the volume in the new namespace, "+
		"re-initialise it with 'plasma datanode init' (its data is lost)", e.Dir, e.Volume, e.Addr, e.Namenode)
}

// DataFile returns the block file (for local short-circuit readers).
func (s *BlockStore) DataFile() *os.File { return s.data }

func (s *BlockStore) check(block uint64, count uint64) error {
	if count == 0 || block >= s.Config.Blocks || count > s.Config.Blocks-block {
		return fmt.Errorf("blocks %d+%d outside the volume (%d blocks)", block, count, s.Config.Blocks)
	}
	return nil
}

// Write stores data (at most one block, zero-padded) as block and records
// crc after checking it against the data. gen is the generation of the
// writer's ticket: the write is refused (auth.ErrTicketStale) if the block
// holds a newer one, and the block holds gen afterwards (NoTicket: neither
// checked nor changed).
func (s *BlockStore) Write(block uint64, data []byte, crc uint32, gen uint64) error {
	bs := int(s.Config.Blocksize)
	if err := s.check(block, 1); err != nil {
		return err
	}
	if len(data) > bs {
		return fmt.Errorf("write of %d bytes exceeds blocksize %d", len(data), bs)
	}
	if got := Checksum(data, bs); got != crc {
		s.badChecksums.Add(1) // metrics.go
		return fmt.Errorf("%w: block %d received with CRC %08x, sender computed %08x", ErrChecksum, block, got, crc)
	}
	m := s.stripe(block)
	m.Lock()
	defer m.Unlock()
	// The generation goes up before the data changes: a reader with an
	// older ticket that checks it after reading cannot have read new data.
	s.mu.Lock()
	stored := s.gens[block]
	if gen == NoTicket {
		gen = stored
	} else if gen < stored {
		s.mu.Unlock()
		return staleError(block, stored, gen)
	}
	s.gens[block] = gen
	s.mu.Unlock()
	off := int64(block) * int64(bs)
	if _, err := s.data.WriteAt(data, off); err != nil {
		return err
	}
	// Whole pages only (a partial page not in the cache would be read
	// from disk first); the rest of the block is the tail.
	n := onDisk(len(data), bs)
	if pad := n - len(data); pad > 0 {
		if _, err := s.data.WriteAt(zeros[:pad], off+int64(len(data))); err != nil {
			return err
		}
	}
	if err := s.releaseTail(block, n); err != nil {
		return err
	}
	// Start writeback now, so the fdatasync before commit finds little
	// left to do and disk writes overlap the transfer.
	unix.SyncFileRange(int(s.data.Fd()), off, int64(n), unix.SYNC_FILE_RANGE_WRITE)
	return s.record(block, crc, gen, uint32(bs-n))
}

const pageSize = 4096

// onDisk is how many bytes of a block with n bytes of data are stored:
// n rounded up to whole pages.
func onDisk(n, bs int) int {
	return min(bs, (n+pageSize-1)/pageSize*pageSize)
}

// Adopt records crc for a block a local client wrote into the data file
// itself (length bytes of data, written up to the next page boundary,
// zeros after the data), after checking the block's content against it,
// and reads the block into buf (for forwarding). gen is checked and
// recorded as by Write.
func (s *BlockStore) Adopt(block uint64, length int, crc uint32, gen uint64, buf []byte) error {
	bs := int(s.Config.Blocksize)
	if err := s.check(block, 1); err != nil {
		return err
	}
	if length < 0 || length > bs {
		length = bs
	}
	m := s.stripe(block)
	m.Lock()
	defer m.Unlock()
	s.mu.RLock()
	stored := s.gens[block]
	s.mu.RUnlock()
	if gen == NoTicket {
		gen = stored
	} else if gen < stored {
		return staleError(block, stored, gen)
	}
	off := int64(block) * int64(bs)
	n := onDisk(length, bs)
	if _, err := s.data.ReadAt(buf[:n], off); err != nil {
		return err
	}
	clear(buf[n:bs])
	if got := Checksum(buf[:n], bs); got != crc {
		s.badChecksums.Add(1) // metrics.go
		return fmt.Errorf("%w: block %d written locally reads as %08x, writer computed %08x", ErrChecksum, block, got, crc)
	}
	if err := s.releaseTail(block, n); err != nil {
		return err
	}
	unix.SyncFileRange(int(s.data.Fd()), off, int64(n), unix.SYNC_FILE_RANGE_WRITE)
	return s.record(block, crc, gen, uint32(bs-n))
}

// record writes a block's entry (checksum, generation, tail) and makes it
// current. Called with the block's stripe held.
func (s *BlockStore) record(block uint64, crc uint32, gen uint64, tail uint32) error {
	var e [metaEntry]byte
	binary.LittleEndian.PutUint32(e[0:], crc^genMix(gen))
	binary.LittleEndian.PutUint32(e[4:], tail)
	binary.LittleEndian.PutUint64(e[8:], gen)
	if _, err := s.data.WriteAt(e[:], s.metaOff+int64(block)*metaEntry); err != nil {
		return err
	}
	s.mu.Lock()
	s.held += int64(s.tails[block]) - int64(tail)
	if k, ok := s.kept[block]; ok {
		// Written over (or the rest punched by releaseTail first).
		delete(s.kept, block)
		s.keptBytes -= int64(k)
	}
	s.gens[block] = gen
	s.crcs[block] = crc
	s.tails[block] = tail
	s.mu.Unlock()
	return nil
}

// Read reads block into buf (len ≥ blocksize), verifies it and returns its
// checksum. maxGen is the generation of the reader's ticket: a block
// holding a newer one is refused (auth.ErrTicketStale); NoTicket allows
// any.
func (s *BlockStore) Read(block uint64, buf []byte, maxGen uint64) (uint32, error) {
	crc, _, err := s.ReadN(block, buf, maxGen)
	return crc, err
}

// ReadN is Read that also returns how many bytes at the start of buf came
// from disk; the rest of the block (its tail) is zeros.
func (s *BlockStore) ReadN(block uint64, buf []byte, maxGen uint64) (uint32, int, error) {
	bs := int(s.Config.Blocksize)
	if err := s.check(block, 1); err != nil {
		return 0, 0, err
	}
	s.mu.RLock()
	n := bs - int(s.tails[block])
	s.mu.RUnlock()
	if _, err := s.data.ReadAt(buf[:n], int64(block)*int64(bs)); err != nil {
		return 0, 0, err
	}
	clear(buf[n:bs])
	// Checked after reading: a writer raises the generation before it
	// changes the data (and a tail changed meanwhile fails the checksum).
	s.mu.RLock()
	want, gen := s.crcs[block], s.gens[block]
	s.mu.RUnlock()
	if gen > maxGen {
		clear(buf[:bs])
		return 0, 0, staleError(block, gen, maxGen)
	}
	if got := Checksum(buf[:n], bs); got != want {
		s.badChecksums.Add(1) // metrics.go
		return 0, 0, fmt.Errorf("%w: block %d of volume %s reads as %08x, stored checksum %08x", ErrChecksum, block, s.Config.Identity, got, want)
	}
	return want, n, nil
}

// Verify checks count blocks from block and returns those that do not match
// their checksums, and the stored checksums. maxGen is as for Read: the
// whole request is refused if any block holds a newer generation.
func (s *BlockStore) Verify(block, count, maxGen uint64) ([]uint64, []uint32, error) {
	if err := s.check(block, count); err != nil {
		return nil, nil, err
	}
	s.mu.RLock()
	crcs := append([]uint32(nil), s.crcs[block:block+count]...)
	var stale error
	for b := block; b < block+count && stale == nil; b++ {
		if s.gens[b] > maxGen {
			stale = staleError(b, s.gens[b], maxGen)
		}
	}
	s.mu.RUnlock()
	if stale != nil {
		return nil, nil, stale
	}
	buf := make([]byte, s.Config.Blocksize)
	var bad []uint64
	for b := block; b < block+count; b++ {
		if _, err := s.Read(b, buf, maxGen); err != nil {
			if errors.Is(err, ErrChecksum) {
				bad = append(bad, b)
				continue
			}
			return bad, crcs, err
		}
	}
	return bad, crcs, nil
}

// Sync makes all writes so far durable: the blocks and their entries, in
// one file.
func (s *BlockStore) Sync() error {
	s.mu.RLock()
	held := s.held
	s.mu.RUnlock()
	if err := unix.Fdatasync(int(s.data.Fd())); err != nil {
		return fmt.Errorf("fdatasync data: %w", err)
	}
	s.mu.Lock()
	s.synced = held
	s.mu.Unlock()
	return nil
}

// Close closes the volume.
func (s *BlockStore) Close() error { return s.data.Close() }

// Gen returns block's generation (0 for a block out of range).
func (s *BlockStore) Gen(block uint64) uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if block >= uint64(len(s.gens)) {
		return 0
	}
	return s.gens[block]
}
