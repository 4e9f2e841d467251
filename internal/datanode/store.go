package datanode

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Checksum returns the CRC32C of a block whose first len(data) bytes are
// data and the rest (up to blocksize) zeros.
func Checksum(data []byte, blocksize int) uint32 {
	c := crc32.Update(0, castagnoli, data)
	for pad := blocksize - len(data); pad > 0; {
		n := min(pad, len(zeros))
		c = crc32.Update(c, castagnoli, zeros[:n])
		pad -= n
	}
	return c
}

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

// Init creates a volume in dir: a new identity, the config file and a
// preallocated data file of size bytes (rounded down to whole blocks).
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
	if err := os.MkdirAll(dir, 0o755); err != nil {
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
	}{{"data", int64(blocks) * int64(blocksize)}, {"crc", int64(blocks) * 4}} {
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

// BlockStore is one volume's blocks and checksums. Safe for concurrent use.
type BlockStore struct {
	Config VolumeConfig
	cfgMu  sync.Mutex // serialises config rewrites
	data   *os.File
	crcf   *os.File
	mu     sync.RWMutex
	crcs   []uint32
}

// ErrChecksum reports a block whose content does not match its checksum.
var ErrChecksum = errors.New("checksum mismatch")

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
	dataPath, crcPath := filepath.Join(dir, "data"), filepath.Join(dir, "crc")
	if s.data, err = os.OpenFile(dataPath, os.O_RDWR, 0); err != nil {
		return nil, fmt.Errorf("datanode volume %s is damaged: %w", dir, err)
	}
	if s.crcf, err = os.OpenFile(crcPath, os.O_RDWR, 0); err != nil {
		s.data.Close()
		return nil, fmt.Errorf("datanode volume %s is damaged: %w", dir, err)
	}
	for _, f := range []struct {
		path string
		fh   *os.File
		want int64
		what string
	}{
		{dataPath, s.data, int64(s.Config.Blocks) * int64(s.Config.Blocksize), fmt.Sprintf("%d blocks of %d bytes", s.Config.Blocks, s.Config.Blocksize)},
		{crcPath, s.crcf, 4 * int64(s.Config.Blocks), fmt.Sprintf("checksums of %d blocks", s.Config.Blocks)},
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
	s.crcs = make([]uint32, s.Config.Blocks)
	for i := range s.crcs {
		s.crcs[i] = binary.LittleEndian.Uint32(raw[4*i:])
	}
	return s, nil
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
// crc after checking it against the data.
func (s *BlockStore) Write(block uint64, data []byte, crc uint32) error {
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
	off := int64(block) * int64(bs)
	if _, err := s.data.WriteAt(data, off); err != nil {
		return err
	}
	for pad := bs - len(data); pad > 0; {
		n := min(pad, len(zeros))
		if _, err := s.data.WriteAt(zeros[:n], off+int64(bs-pad)); err != nil {
			return err
		}
		pad -= n
	}
	// Start writeback now, so the fdatasync before commit finds little
	// left to do and disk writes overlap the transfer.
	unix.SyncFileRange(int(s.data.Fd()), off, int64(bs), unix.SYNC_FILE_RANGE_WRITE)
	return s.setCRC(block, crc)
}

// Adopt records crc for a block a local client wrote into the data file
// itself, after checking the block's content against it, and reads the
// block into buf (for forwarding).
func (s *BlockStore) Adopt(block uint64, crc uint32, buf []byte) error {
	bs := int(s.Config.Blocksize)
	if err := s.check(block, 1); err != nil {
		return err
	}
	off := int64(block) * int64(bs)
	if _, err := s.data.ReadAt(buf[:bs], off); err != nil {
		return err
	}
	if got := crc32.Checksum(buf[:bs], castagnoli); got != crc {
		return fmt.Errorf("%w: block %d written locally reads as %08x, writer computed %08x", ErrChecksum, block, got, crc)
	}
	unix.SyncFileRange(int(s.data.Fd()), off, int64(bs), unix.SYNC_FILE_RANGE_WRITE)
	return s.setCRC(block, crc)
}

func (s *BlockStore) setCRC(block uint64, crc uint32) error {
	var c [4]byte
	binary.LittleEndian.PutUint32(c[:], crc)
	if _, err := s.crcf.WriteAt(c[:], int64(block)*4); err != nil {
		return err
	}
	s.mu.Lock()
	s.crcs[block] = crc
	s.mu.Unlock()
	return nil
}

// Read reads block into buf (len ≥ blocksize), verifies it and returns its
// checksum.
func (s *BlockStore) Read(block uint64, buf []byte) (uint32, error) {
	bs := int(s.Config.Blocksize)
	if err := s.check(block, 1); err != nil {
		return 0, err
	}
	if _, err := s.data.ReadAt(buf[:bs], int64(block)*int64(bs)); err != nil {
		return 0, err
	}
	s.mu.RLock()
	want := s.crcs[block]
	s.mu.RUnlock()
	if got := crc32.Checksum(buf[:bs], castagnoli); got != want {
		return 0, fmt.Errorf("%w: block %d of volume %s reads as %08x, stored checksum %08x", ErrChecksum, block, s.Config.Identity, got, want)
	}
	return want, nil
}

// Verify checks count blocks from block and returns those that do not match
// their checksums, and the stored checksums.
func (s *BlockStore) Verify(block, count uint64) ([]uint64, []uint32, error) {
	if err := s.check(block, count); err != nil {
		return nil, nil, err
	}
	s.mu.RLock()
	crcs := append([]uint32(nil), s.crcs[block:block+count]...)
	s.mu.RUnlock()
	buf := make([]byte, s.Config.Blocksize)
	var bad []uint64
	for b := block; b < block+count; b++ {
		if _, err := s.Read(b, buf); err != nil {
			if errors.Is(err, ErrChecksum) {
				bad = append(bad, b)
				continue
			}
			return bad, crcs, err
		}
	}
	return bad, crcs, nil
}

// Sync makes all writes so far durable.
func (s *BlockStore) Sync() error {
	if err := unix.Fdatasync(int(s.data.Fd())); err != nil {
		return fmt.Errorf("fdatasync data: %w", err)
	}
	if err := unix.Fdatasync(int(s.crcf.Fd())); err != nil {
		return fmt.Errorf("fdatasync crc: %w", err)
	}
	return nil
}

// Close closes the volume files.
func (s *BlockStore) Close() error {
	s.data.Close()
	return s.crcf.Close()
}
