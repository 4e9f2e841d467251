package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clientx"
)

// TestSharedReadsOutliveTheirFile: the FUSE mount writes a READ reply
// from the slices ReadAtShared handed out after the call returned, and
// the mount may end the read's transaction meanwhile (a commit or a
// Release closes the File, an abort abandons it). Until the reply lets go
// of them, those slices must keep the bytes they were handed out with,
// however the File ends and whatever later reads take from the block
// pool. Shared slices of cached and read-ahead blocks of one file are kept
// across the File's end, then other Files read a file of other bytes
// through the same pool, then every slice is checked.
func TestSharedReadsOutliveTheirFile(t *testing.T) {
	for _, end := range []string{"close", "abort"} {
		t.Run(end, func(t *testing.T) {
			ctx := context.Background()
			c := connect()
			defer c.Close()
			name := fmt.Sprintf("/shared-read-end-%s-%d", end, time.Now().UnixNano())
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
			data := sharedReadData(12*bs + 333)
			other := bytes.Repeat([]byte{0xA5}, len(data))
			if _, err := c.CopyIn(ctx, bytes.NewReader(data), name, client.CopyOptions{}); err != nil {
				t.Fatal(err)
			}
			if _, err := c.CopyIn(ctx, bytes.NewReader(other), name+"-other", client.CopyOptions{}); err != nil {
				t.Fatal(err)
			}

			// A pool that drops some buffers (as sync.Pool does under
			// the race detector) may hide one wrong release: several
			// rounds.
			for round := 0; round < 4; round++ {
				sharedReadsOutliveFile(t, c, name, end, bs, data, other)
			}
		})
	}
}

// sharedReadsOutliveFile is one round of TestSharedReadsOutliveTheirFile
// on the file name (holding data) and name+"-other" (holding other).
func sharedReadsOutliveFile(t *testing.T, c *client.Client, name, end string, bs int, data, other []byte) {
	t.Helper()
	ctx := context.Background()
	// Sequential reads of half a block: slices of the cached
	// block and of blocks read ahead, all kept.
	type held struct {
		off     int
		bufs    [][]byte
		release func()
	}
	var kept []held
	defer func() {
		for _, h := range kept {
			h.release()
		}
	}()
	tx := c.Begin()
	f, err := tx.Open(ctx, name)
	if err != nil {
		tx.Abort(ctx)
		t.Fatal(err)
	}
	for off := 0; off < len(data); off += bs / 2 {
		n := min(bs/2, len(data)-off)
		bufs, got, release, err := clientx.ReadAtShared(f, make([]byte, n), int64(off))
		if err != nil && !errors.Is(err, io.EOF) || got != n {
			release()
			tx.Abort(ctx)
			t.Fatalf("ReadAtShared(%d, %d) = %d, %v", n, off, got, err)
		}
		kept = append(kept, held{off, bufs, release})
	}
	switch end {
	case "close":
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		tx.Abort(ctx)
	case "abort":
		tx.Abort(ctx)
	}

	// Other Files take block buffers from the pool and fill
	// them with other bytes: through the cache, read-ahead and
	// whole-block reads, ended each time.
	for pass := 0; pass < 4; pass++ {
		tx2 := c.Begin()
		g, err := tx2.Open(ctx, name+"-other")
		if err != nil {
			tx2.Abort(ctx)
			t.Fatal(err)
		}
		p := make([]byte, bs/3)
		for off := 0; off < len(other); off += len(p) {
			if _, err := g.ReadAt(p, int64(off)); err != nil && !errors.Is(err, io.EOF) {
				tx2.Abort(ctx)
				t.Fatal(err)
			}
		}
		if err := g.Close(); err != nil {
			t.Fatal(err)
		}
		tx2.Abort(ctx)
	}

	for _, h := range kept {
		got := 0
		for _, b := range h.bufs {
			if !bytes.Equal(b, data[h.off+got:h.off+got+len(b)]) {
				t.Fatalf("slice handed out at %d (bytes %d..%d) changed after the File ended", h.off, h.off+got, h.off+got+len(b))
			}
			got += len(b)
		}
	}
}
