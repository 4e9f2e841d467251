package ha

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/plasmafs/plasma/kv"
	"github.com/plasmafs/plasma/tests/testkit"
)

// Issue 22: Plasma KV over a namenode group rides through a failover. A
// writer commits batches, a reader (another client) reads them; after
// the leader's kill -9 the reader still reads its snapshot, the writer's
// next batches commit without an error (the client waits for the
// datanode to register with the new leader), and once refreshed the
// reader sees every batch with the values written.
func TestKVRidesThroughFailover(t *testing.T) {
	g := startGroup(t, 3, 1)
	ctx := context.Background()
	wc, rc := g.client(), g.client()
	defer wc.Close()
	defer rc.Close()
	testkit.MustOK(t, "create the database", kv.Create(ctx, wc, "/db", kv.CreateOptions{}))
	writer, err := kv.Open(ctx, wc, "/db", kv.Options{})
	testkit.MustOK(t, "open the writer", err)
	defer writer.Close()
	reader, err := kv.Open(ctx, rc, "/db", kv.Options{})
	testkit.MustOK(t, "open the reader", err)
	defer reader.Close()

	value := func(b, i int) []byte {
		return bytes.Repeat([]byte(fmt.Sprintf("batch %d key %d;", b, i)), 1+(b*7+i)%40)
	}
	commit := func(b int) {
		t.Helper()
		w, err := writer.Begin(ctx)
		testkit.MustOK(t, fmt.Sprintf("batch %d: begin", b), err)
		for i := range 100 {
			testkit.MustOK(t, "put", w.Put([]byte(fmt.Sprintf("k%03d-%03d", b, i)), value(b, i)))
		}
		testkit.MustOK(t, fmt.Sprintf("batch %d: commit", b), w.Commit(ctx))
	}
	check := func(upTo int, when string) {
		t.Helper()
		for b := range upTo {
			for i := range 100 {
				v, err := reader.Get([]byte(fmt.Sprintf("k%03d-%03d", b, i)))
				if err != nil || !bytes.Equal(v, value(b, i)) {
					t.Fatalf("%s: key k%03d-%03d: %d bytes, %v", when, b, i, len(v), err)
				}
			}
		}
	}
	for b := range 10 {
		commit(b)
	}
	testkit.MustOK(t, "refresh", reader.Refresh(ctx))
	check(10, "before the failover")

	g.kill(g.leader())
	check(10, "the reader's snapshot after the failover")
	// A batch allocates blocks: until the datanode has registered with
	// the new leader, the namenode refuses allocations (ErrUnavailable);
	// the client waits for the registration (client.Config.AllocWait).
	for b := 10; b < 20; b++ {
		commit(b)
	}
	testkit.MustOK(t, "refresh after the failover", reader.Refresh(ctx))
	check(20, "after the failover")
}
