package core

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clustertest"
)

// TestHugeDirectory: a directory of 100,000 entries with 250-byte names
// (25 MB of names, over the 16 MiB frame limit) can be listed, globbed and
// removed: listings and globs are paged.
func TestHugeDirectory(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Security: "none", DataSecurity: "none"})
	cl := c.Client(client.Config{})
	defer cl.Close()
	ctx := context.Background()
	const n = 100000
	name := func(i int) string {
		s := fmt.Sprintf("%06d-", i)
		return s + strings.Repeat("x", 250-len(s))
	}
	if err := cl.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
		_, err := tx.Mkdir(ctx, "/big", 0)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	for start := 0; start < n; start += 20000 {
		err := cl.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
			for i := start; i < start+20000; i++ {
				if _, err := tx.Symlink(ctx, "t", "/big/"+name(i)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	tx := cl.Begin()
	ents, err := tx.ReadDirPlus(ctx, "/big")
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != n {
		t.Fatalf("readdir: %d entries, want %d", len(ents), n)
	}
	for i, e := range ents {
		if e.Name != name(i) || e.Info.Ino != e.Ino || e.Info.Type != client.TypeSymlink {
			t.Fatalf("entry %d: %q %+v", i, e.Name[:10], e.Info)
		}
	}
	paths, err := tx.Glob(ctx, "/big/0*")
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != n {
		t.Fatalf("glob: %d paths, want %d", len(paths), n)
	}
	tx.Abort(ctx)
	out := c.MustRun("ls", "/big")
	if lines := strings.Count(out, "\n"); lines != n {
		t.Fatalf("plasma ls: %d lines, want %d", lines, n)
	}
	c.MustRun("rm", "-r", "/big")
	if _, err := cl.Lookup(ctx, "/big"); err == nil {
		t.Fatal("/big still exists after rm -r")
	}
}
