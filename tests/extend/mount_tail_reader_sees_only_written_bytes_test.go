package extend

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestMountTailReaderSeesOnlyWrittenBytes: in one mount, appenders add
// small lines to a few files (O_APPEND, one write(2) per line, a new
// descriptor every 16 lines) while tail readers of the same files in the
// same mount keep opening them, taking their size and reading their last
// bytes, and another goroutine per file only opens and closes it. Every
// byte a reader gets must be the byte the file holds at that offset at
// the end (the files only grow), never a zero: the lines are text.
//
// Before the mount kept the kernel's page cache while it had a file open
// for writing, a reader's open or attribute refresh dropped the cached
// page that held a write the kernel had copied but not yet sent; a read
// of that page, answered before the write arrived, ended at the old end
// of the file, and the kernel kept the rest of the page as zeros, which
// later reads below the grown size returned.
func TestMountTailReaderSeesOnlyWrittenBytes(t *testing.T) {
	testkit.NeedFUSE(t)
	c := clustertest.Start(t, clustertest.Options{})
	m := testkit.StartMount(t, c)
	const (
		files   = 3
		writers = 2    // per file
		lines   = 6000 // per writer
		perOpen = 16   // lines written through one descriptor
		readers = 3    // per file
	)
	type read struct {
		file int
		off  int64
		data []byte
	}
	var (
		mu    sync.Mutex
		reads []read
		zeros int
	)
	errs := make(chan error, files*(writers+readers+1))
	var wg sync.WaitGroup
	var writing atomic.Int32
	for f := range files {
		testkit.MustOK(t, "create", os.WriteFile(m.Path(fmt.Sprint(f)), appLine(9, f, 40), 0o644))
	}
	for f := range files {
		path := m.Path(fmt.Sprint(f))
		for w := range writers {
			wg.Add(1)
			writing.Add(1)
			go func() {
				defer wg.Done()
				defer writing.Add(-1)
				for seq := 0; seq < lines; seq += perOpen {
					fh, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
					for s := seq; err == nil && s < seq+perOpen; s++ {
						// Short lines: most writes start and end inside the
						// page that holds the end of the file.
						_, err = fh.Write(appLine(w, s, 1+(s*37+w*11)%150))
					}
					if fh != nil {
						if cerr := fh.Close(); err == nil {
							err = cerr
						}
					}
					if err != nil {
						errs <- fmt.Errorf("appender %d of %s, line %d: %w", w, path, seq, err)
						return
					}
				}
			}()
		}
		// An opener: every open made the kernel drop the file's pages.
		wg.Add(1)
		go func() {
			defer wg.Done()
			for writing.Load() > 0 {
				fh, err := os.Open(path)
				if err != nil {
					errs <- err
					return
				}
				fh.Close()
			}
		}()
		for r := range readers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; writing.Load() > 0 || i < 2; i++ {
					fh, err := os.Open(path)
					if err != nil {
						errs <- err
						return
					}
					st, err := fh.Stat()
					if err == nil {
						off := max(0, st.Size()-int64(100+(i*131+r*57)%3000))
						buf := make([]byte, st.Size()-off)
						var n int
						n, err = fh.ReadAt(buf, off)
						if err == io.EOF {
							err = nil
						}
						mu.Lock()
						reads = append(reads, read{f, off, buf[:n]})
						if bytes.IndexByte(buf[:n], 0) >= 0 {
							zeros++
						}
						mu.Unlock()
					}
					fh.Close()
					if err != nil {
						errs <- fmt.Errorf("tail read of %s: %w", path, err)
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	final := make([][]byte, files)
	for f := range files {
		b, err := os.ReadFile(m.Path(fmt.Sprint(f)))
		testkit.MustOK(t, "read the file at the end", err)
		if _, err := appParseLines(b, false); err != nil {
			t.Errorf("file %d at the end: %v", f, err)
		}
		final[f] = b
	}
	wrong := 0
	for _, r := range reads {
		fb := final[r.file]
		end := r.off + int64(len(r.data))
		if end <= int64(len(fb)) && bytes.Equal(fb[r.off:end], r.data) {
			continue
		}
		if wrong < 3 {
			t.Errorf("file %d: a read of %d bytes at %d returned bytes the file does not hold there: %s", r.file, len(r.data), r.off, appDiff(r.data, fb[min(r.off, int64(len(fb))):min(end, int64(len(fb)))]))
		}
		wrong++
	}
	if wrong > 0 {
		t.Errorf("%d of %d tail reads were wrong, %d of them with zeros", wrong, len(reads), zeros)
	}
	t.Logf("%d tail reads", len(reads))
}
