package bench

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// dropCache writes path's dirty pages back and drops its pages from the
// page cache, so what is timed next finds none of it cached.
func dropCache(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.Fdatasync(int(f.Fd())); err != nil {
		return fmt.Errorf("fdatasync %s: %w", path, err)
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		return fmt.Errorf("drop the cached pages of %s: %w", path, err)
	}
	return nil
}
