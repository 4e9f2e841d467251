package mount

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestConcurrentMountReadsExactWhileAppended: several processes' worth of
// readers read one file through the mount at once (separate handles, and
// one handle shared by goroutines reading different megabytes, which the
// kernel sends as concurrent READs), their cached pages dropped before
// every round so each round goes through FUSE, while another client
// appends to the file and commits, over and over. The mount answers READs
// straight from the client's pooled blocks (no copy) and copies
// concurrently without the file's lock; every byte of the original range
// must come back as written: a block reused before its reply went out
// would show here as another part of the file, or as the appender's bytes.
func TestConcurrentMountReadsExactWhileAppended(t *testing.T) {
	testkit.NeedFUSE(t)
	c := clustertest.Start(t, clustertest.Options{})
	m := testkit.StartMount(t, c)
	data := testkit.SeededBytes(12<<20+333, 27)
	testkit.MustOK(t, "write", os.WriteFile(m.Path("f"), data, 0o644))

	// Another client appends 64 KiB at a time, each committed.
	ctx := context.Background()
	cl := c.Client(client.Config{})
	defer cl.Close()
	stop := make(chan struct{})
	appended := make(chan error, 1)
	go func() {
		appended <- func() error {
			junk := bytes.Repeat([]byte{0xEE}, 64<<10)
			for {
				select {
				case <-stop:
					return nil
				default:
				}
				err := cl.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
					f, err := tx.Open(ctx, "/f")
					if err != nil {
						return err
					}
					_, err = f.WriteAt(junk, f.Size())
					return err
				})
				if err != nil {
					return fmt.Errorf("append: %w", err)
				}
			}
		}()
	}()

	const mib = 1 << 20
	check := func(what string, got []byte, off int) error {
		if !bytes.Equal(got, data[off:off+len(got)]) {
			i := 0
			for i < len(got) && got[i] == data[off+i] {
				i++
			}
			return fmt.Errorf("%s: byte %d of the file differs (read %#x, written %#x)", what, off+i, got[i], data[off+i])
		}
		return nil
	}
	errs := make(chan error, 64)
	for round := 0; round < 30; round++ {
		var wg sync.WaitGroup
		// Readers with their own handles, the whole original range.
		for r := 0; r < 3; r++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				f, err := os.Open(m.Path("f"))
				if err != nil {
					errs <- err
					return
				}
				defer f.Close()
				unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
				got := make([]byte, len(data))
				n, err := f.ReadAt(got, 0)
				if n != len(data) {
					errs <- fmt.Errorf("round %d reader %d: read %d of %d bytes: %v", round, r, n, len(data), err)
					return
				}
				if err := check(fmt.Sprintf("round %d reader %d", round, r), got, 0); err != nil {
					errs <- err
				}
			}()
		}
		// One handle, one goroutine per megabyte.
		f, err := os.Open(m.Path("f"))
		testkit.MustOK(t, "open", err)
		unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
		for off := 0; off < len(data); off += mib {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got := make([]byte, min(mib, len(data)-off))
				if n, err := f.ReadAt(got, int64(off)); n != len(got) {
					errs <- fmt.Errorf("round %d shared handle at %d: read %d of %d bytes: %v", round, off, n, len(got), err)
					return
				}
				if err := check(fmt.Sprintf("round %d shared handle", round), got, off); err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		f.Close()
	}
	close(stop)
	testkit.MustOK(t, "appender", <-appended)
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
