package client_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/plasmafs/plasma/client"
)

// TestConcurrentClients runs creators, writers and readers at once against
// one namenode (run it with -race): every commit is visible afterwards and
// conflicts are reported, never lost updates.
func TestConcurrentClients(t *testing.T) {
	ctx := context.Background()
	dir := fmt.Sprintf("/conc-%d", time.Now().UnixNano())
	setup := connect()
	defer setup.Close()
	if err := setup.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
		if _, err := tx.MkdirAll(ctx, dir, 0); err != nil {
			return err
		}
		_, err := tx.Create(ctx, dir+"/counter", client.CreateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	const workers, files = 6, 25
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := connect()
			defer c.Close()
			for i := 0; i < files; i++ {
				name := fmt.Sprintf("%s/w%d-%d", dir, w, i)
				data := bytes.Repeat([]byte{byte(w), byte(i)}, 1000*(i+1))
				if _, err := c.CopyIn(ctx, bytes.NewReader(data), name, client.CopyOptions{Rep: 1 + i%2}); err != nil {
					errs <- err
					return
				}
				// Every worker also bumps a shared counter file, retrying on conflict.
				err := c.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
					f, err := tx.Open(ctx, dir+"/counter")
					if err != nil {
						return err
					}
					b := make([]byte, 8)
					f.ReadAt(b, 0)
					b[0]++
					if b[0] == 0 {
						b[1]++
					}
					_, err = f.WriteAt(b, 0)
					return err
				})
				if err != nil {
					errs <- fmt.Errorf("counter: %w", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	c := connect()
	defer c.Close()
	tx := c.Begin()
	defer tx.Abort(ctx)
	ents, err := tx.ReadDir(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != workers*files+1 {
		t.Fatalf("%d entries, want %d", len(ents), workers*files+1)
	}
	f, err := tx.Open(ctx, dir+"/counter")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(f)
	if got := int(b[0]) + 256*int(b[1]); got != workers*files {
		t.Fatalf("counter %d, want %d: an update was lost", got, workers*files)
	}
	for w := 0; w < workers; w++ {
		g, _ := tx.Open(ctx, fmt.Sprintf("%s/w%d-7", dir, w))
		got, _ := io.ReadAll(g)
		if !bytes.Equal(got, bytes.Repeat([]byte{byte(w), 7}, 8000)) {
			t.Fatalf("worker %d file differs", w)
		}
	}
	rep, err := c.Fsck(ctx)
	if err != nil || len(rep.Problems) > 0 {
		t.Fatalf("fsck: %v %v", err, rep.Problems)
	}
}
