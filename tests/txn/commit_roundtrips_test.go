package txn

import (
	"bytes"
	"context"
	"testing"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clientx"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestCommitAttachesWithTheCommit: a transaction that writes a file sends
// its last blocks' attachment together with the commit: create, allocate
// and attach+commit are three namenode requests, and the data is there.
func TestCommitAttachesWithTheCommit(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	ctx := context.Background()
	cl := c.Client(client.Config{})
	defer cl.Close()
	data := bytes.Repeat([]byte("x"), 3000)
	before := clientx.NamenodeRequests(cl)
	tx := cl.Begin()
	f, err := tx.CreateFile(ctx, "/f", client.CreateOptions{})
	testkit.MustOK(t, "create", err)
	_, err = f.Write(data)
	testkit.MustOK(t, "write", err)
	testkit.MustOK(t, "commit", tx.Commit(ctx))
	if n := clientx.NamenodeRequests(cl) - before; n != 3 {
		t.Errorf("create, write and commit took %d namenode requests, want 3 (create, allocate, attach with the commit)", n)
	}
	if got := testkit.ReadFile(t, cl, "/f"); !bytes.Equal(got, data) {
		t.Fatalf("read back %d bytes, want the %d written", len(got), len(data))
	}
}
