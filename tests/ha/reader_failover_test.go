package ha

import (
	"bytes"
	"context"
	"testing"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/tests/testkit"
)

// Issue 22: a long reader rides through a failover. A file open in a
// transaction on the old leader is read in part before the leader's
// kill -9 and the rest after, once the datanodes have registered with the new
// leader (and so learnt its term): the reader's read tickets stay good,
// as read tickets are not held to the term (a deposed leader's tickets
// write nothing, but read what they were issued for), and its block list
// needs no namenode. Fails if the datanodes refuse read tickets of an
// older term.
func TestReaderRidesThroughFailover(t *testing.T) {
	g := startGroupWith(t, 3, 2, groupOptions{Tickets: true})
	ctx := context.Background()
	// Over TCP, with tickets, also for blocks on this machine (a
	// short-circuit reader keeps the descriptors it was given).
	cl, err := client.New(ctx, client.Config{Namenodes: g.addrs(), Security: "none", DataSecurity: "auth", CredentialFile: g.sec.user, NoShortCircuit: true})
	testkit.MustOK(t, "client", err)
	defer cl.Close()
	data := testkit.SeededBytes(24<<20+123, 7)
	testkit.WriteFile(t, cl, "/big", data, 2)

	tx := cl.Begin()
	defer tx.Abort(ctx)
	f, err := tx.Open(ctx, "/big")
	testkit.MustOK(t, "open /big", err)
	// The first megabyte before, the rest after: from far into the file
	// (not read ahead), then the middle.
	first, far := 1<<20, 16<<20
	got := make([]byte, len(data))
	if n, err := f.ReadAt(got[:first], 0); err != nil || n != first {
		t.Fatalf("read before the failover: %d bytes, %v", n, err)
	}
	g.kill(g.leader())
	g.leader()
	g.waitLive(2) // registered with the new leader: they know its term
	if n, err := f.ReadAt(got[far:], int64(far)); err != nil || n != len(data)-far {
		t.Fatalf("read from %d after the failover: %d bytes, %v", far, n, err)
	}
	if n, err := f.ReadAt(got[first:far], int64(first)); err != nil || n != far-first {
		t.Fatalf("read from %d after the failover: %d bytes, %v", first, n, err)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("the file read across the failover differs from what was written")
	}
}
