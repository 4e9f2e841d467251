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
}

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
)

// Init creates a volume in dir: a new identity, the config file, a
// preallocated data file of size bytes (rounded down to whole blocks), and
// the crc, gen and tail files (4, 8 and 4 bytes per block).
func Init(dir, cluster string, blocksize uint32, size int64) (*VolumeConfig, error) {
	return InitWith(dir, cluster, blocksize, size, PreallocZero)
}

// InitWith is Init with a choice of preallocation.
func InitWith(dir, cluster string, blocksize uint32, size int64, how Preallocation) (*VolumeConfig, error) {
	if blocksize < 4096 || blocksize > 64<<20 || blocksize&(blocksize-1) != 0 {
		return nil, fmt.Errorf("blocksize %d: must be a power of two between 4 KiB and 64 MiB", blocksize)
	}
	if cluster == "" {
		return nil, errors.New("cluster name is empty")
	}
	blocks := uint64(size) / uint64(blocksize)
	if size <= 0 || blocks == 0 {
		return nil, fmt.Errorf("size %d is smaller than one block (%d bytes)", size, blocksize)
	}
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
	cfg := &VolumeConfig{Identity: hex.EncodeToString(id), Cluster: cluster, Blocksize: blocksize, Blocks: blocks}
	for _, f := range []struct {
		name string
		size int64
	}{{"data", int64(blocks) * int64(blocksize)}, {"crc", int64(blocks) * 4}, {"gen", int64(blocks) * 8}, {"tail", int64(blocks) * 4}} {
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
// Short blocks: a block is logically blocksize bytes, zero after its data.
// Only the data, rounded up to whole 4 KiB pages, is written; the file
// tail (4 bytes per block, little-endian) records how many bytes at the
// block's end were not written and read as zeros (0: the whole block is on
// disk, as for volumes from before the file existed). A small file, or
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
// read with a ticket older than the block: see auth.Ticket. Generations
// are kept in the file gen (8 bytes per block, little-endian), made
// durable with the block by Sync.
//
// Torn writes: the crc file holds each block's CRC32C XOR genMix(its
// generation), so the checksum entry and the generation entry, which sit
// in two files written back independently, only verify together. After a
// power cut that kept a block's new data and checksum but lost its new
// generation, the block fails its checksum instead of being readable with
// a ticket from before its new owner's allocation. genMix(0) is 0: the crc
// file of a volume from before generations is valid as it is.
type BlockStore struct {
	Config VolumeConfig
	cfgMu  sync.Mutex // serialises config rewrites
	data   *os.File
	crcf   *os.File
	genf   *os.File
	tailf  *os.File
	mu     sync.RWMutex
	crcs   []uint32 // CRC32C of each block (not XORed)
	gens   []uint64
	tails  []uint32 // zero bytes at each block's end that are not on disk
	// genDirty, tailDirty: gen or tail was written since the last Sync
	// began.
	genDirty  atomic.Bool
	tailDirty atomic.Bool
	// Writes of one block are serialised (the generation check, the data
	// and the checksum go together); blocks share stripes.
	stripes [64]sync.Mutex
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

// OpenBlockStore opens the volume in dir. A damaged volume (config
// unreadable, data or crc file missing or shorter than the config says) is
// refused with an error naming the file.
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
		s.Config.Blocks == 0 || s.Config.Blocks > math.MaxInt64/uint64(s.Config.Blocksize):
		return nil, fmt.Errorf("%s/config is corrupt: identity %q, %d blocks of %d bytes", dir, s.Config.Identity, s.Config.Blocks, s.Config.Blocksize)
	}
	dataPath, crcPath, genPath, tailPath := filepath.Join(dir, "data"), filepath.Join(dir, "crc"), filepath.Join(dir, "gen"), filepath.Join(dir, "tail")
	if s.data, err = os.OpenFile(dataPath, os.O_RDWR, 0); err != nil {
		return nil, fmt.Errorf("datanode volume %s is damaged: %w", dir, err)
	}
	if s.crcf, err = os.OpenFile(crcPath, os.O_RDWR, 0); err != nil {
		s.data.Close()
		return nil, fmt.Errorf("datanode volume %s is damaged: %w", dir, err)
	}
	s.genf, err = os.OpenFile(genPath, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		// A volume made before blocks had generations: all are 0.
		s.genf, err = createZeroed(dir, "gen", 8*int64(s.Config.Blocks))
	}
	if err != nil {
		s.data.Close()
		s.crcf.Close()
		return nil, fmt.Errorf("datanode volume %s: %w", dir, err)
	}
	s.tailf, err = os.OpenFile(tailPath, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		// A volume made before short blocks: every block is whole.
		s.tailf, err = createZeroed(dir, "tail", 4*int64(s.Config.Blocks))
	}
	if err != nil {
		s.data.Close()
		s.crcf.Close()
		s.genf.Close()
		return nil, fmt.Errorf("datanode volume %s: %w", dir, err)
	}
	for _, f := range []struct {
		path string
		fh   *os.File
		want int64
		what string
	}{
		{dataPath, s.data, int64(s.Config.Blocks) * int64(s.Config.Blocksize), fmt.Sprintf("%d blocks of %d bytes", s.Config.Blocks, s.Config.Blocksize)},
		{crcPath, s.crcf, 4 * int64(s.Config.Blocks), fmt.Sprintf("checksums of %d blocks", s.Config.Blocks)},
		{genPath, s.genf, 8 * int64(s.Config.Blocks), fmt.Sprintf("generations of %d blocks", s.Config.Blocks)},
		{tailPath, s.tailf, 4 * int64(s.Config.Blocks), fmt.Sprintf("tail lengths of %d blocks", s.Config.Blocks)},
	} {
		st, err := f.fh.Stat()
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("%s: %w", f.path, err)
		}
		if st.Size() < f.want {
			s.Close()
			return nil, fmt.Errorf("%s is truncated: %d bytes, but %s (as %s says) need %d: the volume is damaged", f.path, st.Size(), f.what, cfgPath, f.want)
		}
	}
	raw := make([]byte, 4*s.Config.Blocks)
	if _, err := s.crcf.ReadAt(raw, 0); err != nil {
		s.Close()
		return nil, fmt.Errorf("%s: %w", crcPath, err)
	}
	s.gens = make([]uint64, s.Config.Blocks)
	chunk := make([]byte, 8<<16)
	for i := uint64(0); i < s.Config.Blocks; {
		n := min(s.Config.Blocks-i, uint64(len(chunk)/8))
		if _, err := s.genf.ReadAt(chunk[:8*n], int64(8*i)); err != nil {
			s.Close()
			return nil, fmt.Errorf("%s: %w", genPath, err)
		}
		for k := uint64(0); k < n; k++ {
			s.gens[i+k] = binary.LittleEndian.Uint64(chunk[8*k:])
		}
		i += n
	}
	s.crcs = make([]uint32, s.Config.Blocks)
	for i := range s.crcs {
		s.crcs[i] = binary.LittleEndian.Uint32(raw[4*i:]) ^ genMix(s.gens[i])
	}
	if _, err := s.tailf.ReadAt(raw, 0); err != nil {
		s.Close()
		return nil, fmt.Errorf("%s: %w", tailPath, err)
	}
	s.tails = make([]uint32, s.Config.Blocks)
	for i := range s.tails {
		t := binary.LittleEndian.Uint32(raw[4*i:])
		if t >= s.Config.Blocksize || t%pageSize != 0 {
			t = 0 // damaged entry: read the whole block (the checksum decides)
		}
		s.tails[i] = t
	}
	return s, nil
}

// createZeroed creates the file name in dir with size zero bytes, durably
// (a temporary file, fsynced, renamed into place, the directory fsynced),
// and opens it for reading and writing.
func createZeroed(dir, name string, size int64) (*os.File, error) {
	tmp := filepath.Join(dir, name+".tmp")
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	err = f.Truncate(size)
	if err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, name))
	}
	if err == nil {
		err = syncDir(dir)
	}
	if err != nil {
		f.Close()
		os.Remove(tmp)
		return nil, fmt.Errorf("create %s: %w", filepath.Join(dir, name), err)
	}
	return f, nil
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
		return fmt.Errorf("%w: block %d written locally reads as %08x, writer computed %08x", ErrChecksum, block, got, crc)
	}
	unix.SyncFileRange(int(s.data.Fd()), off, int64(n), unix.SYNC_FILE_RANGE_WRITE)
	return s.record(block, crc, gen, uint32(bs-n))
}

// record writes a block's checksum, generation and tail entries, then
// makes them current together. Called with the block's stripe held.
func (s *BlockStore) record(block uint64, crc uint32, gen uint64, tail uint32) error {
	s.mu.RLock()
	oldTail := s.tails[block]
	s.mu.RUnlock()
	if tail != oldTail {
		var t [4]byte
		binary.LittleEndian.PutUint32(t[:], tail)
		s.tailDirty.Store(true)
		if _, err := s.tailf.WriteAt(t[:], int64(block)*4); err != nil {
			return err
		}
	}
	var g [8]byte
	binary.LittleEndian.PutUint64(g[:], gen)
	s.genDirty.Store(true)
	if _, err := s.genf.WriteAt(g[:], int64(block)*8); err != nil {
		return err
	}
	var c [4]byte
	binary.LittleEndian.PutUint32(c[:], crc^genMix(gen))
	if _, err := s.crcf.WriteAt(c[:], int64(block)*4); err != nil {
		return err
	}
	s.mu.Lock()
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

// Sync makes all writes so far durable. The files are synced at the same
// time: each fdatasync waits for its own flush, and a commit waits for
// them all.
func (s *BlockStore) Sync() error {
	syncs := []struct {
		name  string
		f     *os.File
		dirty *atomic.Bool
	}{{"crc", s.crcf, nil}, {"gen", s.genf, &s.genDirty}, {"tail", s.tailf, &s.tailDirty}}
	errs := make([]error, len(syncs))
	var wg sync.WaitGroup
	for i, x := range syncs {
		if x.dirty != nil && !x.dirty.Swap(false) {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := unix.Fdatasync(int(x.f.Fd())); err != nil {
				if x.dirty != nil {
					x.dirty.Store(true)
				}
				errs[i] = fmt.Errorf("fdatasync %s: %w", x.name, err)
			}
		}()
	}
	var derr error
	if err := unix.Fdatasync(int(s.data.Fd())); err != nil {
		derr = fmt.Errorf("fdatasync data: %w", err)
	}
	wg.Wait()
	return errors.Join(append([]error{derr}, errs...)...)
}

// Close closes the volume files.
func (s *BlockStore) Close() error {
	s.data.Close()
	if s.genf != nil {
		s.genf.Close()
	}
	if s.tailf != nil {
		s.tailf.Close()
	}
	return s.crcf.Close()
}

// Gen returns block's generation (0 for a block out of range).
func (s *BlockStore) Gen(block uint64) uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if block >= uint64(len(s.gens)) {
		return 0
	}
	return s.gens[block]
}
