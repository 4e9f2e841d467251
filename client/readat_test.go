package client_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/plasmafs/plasma/client"
)

// TestParallelReadAt: File.ReadAt honours the io.ReaderAt contract, so many
// goroutines may read one open file at once, at any offsets and lengths
// (partial blocks share the file's block cache).
func TestParallelReadAt(t *testing.T) {
	ctx := context.Background()
	c := connect()
	defer c.Close()
	const bs = 64 << 10
	data := make([]byte, 40*bs+777)
	for i := range data {
		data[i] = byte(i*7 + i/bs)
	}
	name := fmt.Sprintf("/readat-%d", time.Now().UnixNano())
	if _, err := c.CopyIn(ctx, bytes.NewReader(data), name, client.CopyOptions{}); err != nil {
		t.Fatal(err)
	}
	tx := c.Begin()
	defer tx.Abort(ctx)
	f, err := tx.Open(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			for i := 0; i < 300; i++ {
				off := rng.IntN(len(data))
				n := 1 + rng.IntN(min(3*bs, len(data)-off))
				buf := make([]byte, n)
				if _, err := f.ReadAt(buf, int64(off)); err != nil {
					errs <- fmt.Errorf("ReadAt(%d, %d): %v", n, off, err)
					return
				}
				if !bytes.Equal(buf, data[off:off+n]) {
					errs <- fmt.Errorf("ReadAt(%d, %d) returned wrong bytes", n, off)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
