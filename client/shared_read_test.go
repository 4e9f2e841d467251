package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clientx"
)

// sharedReadData is the content of the file the shared-read tests read:
// every byte depends on its offset, so a byte from elsewhere shows.
func sharedReadData(n int) []byte {
	data := make([]byte, n)
	for i := range data {
		data[i] = byte(i*131 + i>>11 + 17)
	}
	return data
}

// TestSharedReadsKeepTheirBlocksUnderReuse: the slices ReadAtShared hands
// out (the FUSE mount writes its READ replies from them) point into the
// client's pooled block buffers; until they are released those blocks must
// not be reused, however many reads replace the cache, read ahead and
// return buffers to the pool meanwhile. Readers keep several reads' slices
// outstanding and check them only later, while other readers of the same
// File (shared and copying ReadAt, at once) and another client overwriting
// and appending to the file churn the same block pool with other bytes.
// The File reads its own version throughout: every byte is checked against
// the original.
func TestSharedReadsKeepTheirBlocksUnderReuse(t *testing.T) {
	ctx := context.Background()
	c := connect()
	defer c.Close()
	name := fmt.Sprintf("/shared-read-%d", time.Now().UnixNano())
	probe := sharedReadData(1)
	if _, err := c.CopyIn(ctx, bytes.NewReader(probe), name+"-probe", client.CopyOptions{}); err != nil {
		t.Fatal(err)
	}
	tx0 := c.Begin()
	fi, err := tx0.Lookup(ctx, name+"-probe")
	tx0.Abort(ctx)
	if err != nil {
		t.Fatal(err)
	}
	bs := fi.Blocksize
	data := sharedReadData(40*bs + 777)
	if _, err := c.CopyIn(ctx, bytes.NewReader(data), name, client.CopyOptions{}); err != nil {
		t.Fatal(err)
	}

	tx := c.Begin()
	defer tx.Abort(ctx)
	f, err := tx.Open(ctx, name)
	if err != nil {
		t.Fatal(err)
	}

	// Another client rewrites blocks of the file and appends to it,
	// committing each time, with bytes unlike the file's.
	stop := make(chan struct{})
	writerDone := make(chan error, 1)
	go func() {
		writerDone <- func() error {
			w := connect()
			defer w.Close()
			junk := bytes.Repeat([]byte{0xEE}, 3*bs)
			rng := rand.New(rand.NewPCG(99, 1))
			for {
				select {
				case <-stop:
					return nil
				default:
				}
				err := w.Txn(ctx, func(ctx context.Context, wtx *client.Txn) error {
					g, err := wtx.Open(ctx, name)
					if err != nil {
						return err
					}
					if _, err := g.WriteAt(junk, int64(rng.IntN(38))*int64(bs)); err != nil {
						return err
					}
					if _, err := g.WriteAt(junk[:bs], g.Size()); err != nil {
						return err
					}
					return g.Close()
				})
				if err != nil {
					return fmt.Errorf("writer: %w", err)
				}
			}
		}()
	}()

	sizes := []int{bs / 4, bs, bs + bs/2, 2 * bs, 4096}
	type pending struct {
		off     int
		bufs    [][]byte
		n       int
		release func()
	}
	check := func(p pending) error {
		defer p.release()
		got := 0
		for _, b := range p.bufs {
			if !bytes.Equal(b, data[p.off+got:p.off+got+len(b)]) {
				return fmt.Errorf("shared read at %d: bytes %d..%d differ from the file's", p.off, p.off+got, p.off+got+len(b))
			}
			got += len(b)
		}
		if got != p.n {
			return fmt.Errorf("shared read at %d: slices hold %d bytes, n = %d", p.off, got, p.n)
		}
		return nil
	}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := 0; g < 6; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			var queue []pending
			defer func() {
				for _, p := range queue {
					p.release()
				}
			}()
			for pass := 0; pass < 3; pass++ {
				// Sequential passes (read-ahead, cache replacement) from
				// a per-reader start, in reads of varying size.
				off := rng.IntN(8) * bs / 2
				for off < len(data) {
					n := min(sizes[rng.IntN(len(sizes))], len(data)-off)
					p := make([]byte, n)
					if g%3 == 2 && rng.IntN(2) == 0 {
						got, err := f.ReadAt(p, int64(off))
						if err != nil && !errors.Is(err, io.EOF) || got != n {
							errs <- fmt.Errorf("ReadAt(%d, %d) = %d, %v", n, off, got, err)
							return
						}
						if !bytes.Equal(p, data[off:off+n]) {
							errs <- fmt.Errorf("ReadAt(%d, %d) returned wrong bytes", n, off)
							return
						}
					} else {
						bufs, got, release, err := clientx.ReadAtShared(f, p, int64(off))
						if err != nil && !errors.Is(err, io.EOF) || got != n {
							release()
							errs <- fmt.Errorf("ReadAtShared(%d, %d) = %d, %v", n, off, got, err)
							return
						}
						queue = append(queue, pending{off, bufs, got, release})
						if len(queue) > 6 {
							if err := check(queue[0]); err != nil {
								queue = queue[1:]
								errs <- err
								return
							}
							queue = queue[1:]
						}
					}
					off += n
				}
			}
			for len(queue) > 0 {
				p := queue[0]
				queue = queue[1:]
				if err := check(p); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	if err := <-writerDone; err != nil {
		t.Fatal(err)
	}
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
