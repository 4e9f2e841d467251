package client_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/plasmafs/plasma/client"
)

// TestTxnDirLinkCount: inside a transaction a directory's link count
// counts the transaction's own mkdirs, rmdirs and directory moves (2 +
// subdirectories, POSIX), while other clients see the committed count
// until it commits.
func TestTxnDirLinkCount(t *testing.T) {
	ctx := context.Background()
	c, other := connect(), connect()
	defer c.Close()
	defer other.Close()
	x := fmt.Sprintf("/nlink-%d", time.Now().UnixNano())
	nlink := func(tx *client.Txn, p string) uint32 {
		t.Helper()
		fi, err := tx.Lstat(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Nlink
	}
	tx := c.Begin()
	for _, d := range []string{x, x + "/a", x + "/b", x + "/c"} {
		if _, err := tx.Mkdir(ctx, d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if got := nlink(tx, x); got != 5 {
		t.Fatalf("after three mkdirs in the transaction: link count %d, want 5", got)
	}
	if err := tx.Rmdir(ctx, x+"/a"); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rename(ctx, x+"/b", x+"/c/b"); err != nil {
		t.Fatal(err)
	}
	if got, gotC := nlink(tx, x), nlink(tx, x+"/c"); got != 3 || gotC != 3 {
		t.Fatalf("after an rmdir and a move: %s %d, %s/c %d; want 3 and 3", x, got, x, gotC)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	tx2 := c.Begin()
	defer tx2.Abort(ctx)
	if _, err := tx2.Mkdir(ctx, x+"/d", 0o755); err != nil {
		t.Fatal(err)
	}
	if got := nlink(tx2, x); got != 4 {
		t.Fatalf("committed 3 plus a mkdir in the transaction: %d, want 4", got)
	}
	otx := other.Begin()
	defer otx.Abort(ctx)
	if got := nlink(otx, x); got != 3 {
		t.Fatalf("another client sees %d before the commit, want the committed 3", got)
	}
}
