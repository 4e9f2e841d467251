package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/plasmafs/plasma/client"
)

// TestReadAfterCancelFromCache: once a File's context is cancelled its
// reads fail with the context's error, also for data already at hand
// (the block just read, which the File keeps cached).
func TestReadAfterCancelFromCache(t *testing.T) {
	c := connect()
	defer c.Close()
	p := fmt.Sprintf("/cancel-%d", time.Now().UnixNano())
	if _, err := c.CopyIn(context.Background(), bytes.NewReader(bytes.Repeat([]byte("x"), 4096)), p, client.CopyOptions{}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	tx := c.Begin()
	f, err := tx.Open(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 100)
	if _, err := f.ReadAt(buf, 0); err != nil {
		t.Fatal(err)
	}
	cancel()
	if _, err := f.ReadAt(buf, 100); !errors.Is(err, context.Canceled) {
		t.Fatalf("read of a cached block after the cancel: %v, want context.Canceled", err)
	}
	tx.Abort(context.Background())
}
