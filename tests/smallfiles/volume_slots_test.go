package smallfiles

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// volumeSlots is what a sparse volume's files say, read from outside the
// datanode: its config, each slot's entry and which ranges of the data
// file have pages on disk.
type volumeSlots struct {
	blocksize, capacity int64
	layout              int
	held, kept          int64      // bytes of blocks on disk, of kept pages (entries)
	onDisk              int64      // bytes of the slots' range with pages (SEEK_DATA)
	extents             [][2]int64 // those ranges
	// pastData lists slots with pages beyond what their entry says is
	// on disk (a block's data, or kept pages).
	pastData []string
}

// readVolume reads the volume in dir (layout 3 entries: tail field's top
// bit marks an empty slot keeping pages, datanode/keep.go).
func readVolume(t *testing.T, dir string) volumeSlots {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "config"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Blocksize int64 `json:"blocksize"`
		Blocks    int64 `json:"blocks"`
		Layout    int   `json:"layout"`
		Capacity  int64 `json:"capacity"`
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	v := volumeSlots{blocksize: cfg.Blocksize, capacity: cfg.Capacity, layout: cfg.Layout}
	f, err := os.Open(filepath.Join(dir, "data"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	bs, metaOff := cfg.Blocksize, cfg.Blocks*cfg.Blocksize
	entries := make([]byte, cfg.Blocks*16)
	if _, err := f.ReadAt(entries, metaOff); err != nil {
		t.Fatal(err)
	}
	stored := make([]int64, cfg.Blocks) // bytes each slot may have on disk
	for s := range cfg.Blocks {
		tail := binary.LittleEndian.Uint32(entries[s*16+4:])
		if tail&(1<<31) != 0 {
			stored[s] = bs - int64(tail&^(1<<31))
			v.kept += stored[s]
		} else {
			stored[s] = bs - int64(tail)
			v.held += stored[s]
		}
	}
	for off := int64(0); off < metaOff; {
		start, err := unix.Seek(int(f.Fd()), off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) || start >= metaOff {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		end, err := unix.Seek(int(f.Fd()), start, unix.SEEK_HOLE)
		if err != nil {
			t.Fatal(err)
		}
		end = min(end, metaOff)
		v.extents = append(v.extents, [2]int64{start, end})
		v.onDisk += end - start
		for s := start / bs; s*bs < end; s++ {
			if to := min(end, (s+1)*bs); to > s*bs+stored[s] {
				v.pastData = append(v.pastData, fmt.Sprintf("slot %d: pages up to +%d, its entry says %d bytes", s, to-s*bs, stored[s]))
			}
		}
		off = end
	}
	return v
}
