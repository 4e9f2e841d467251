package core

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestWriterRidesThroughRestartBeforeRegistration restarts
// the namenode while its only datanode is frozen (so it cannot register
// again) and has a client-library writer (CopyIn, as 'plasma put') start
// at once: the namenode refuses its create and allocations for want of
// live datanodes, and the client waits that out (Config.AllocWait)
// until the datanode, resumed, has registered. Without the wait the
// writer fails with ErrUnavailable.
func TestWriterRidesThroughRestartBeforeRegistration(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Datanodes: 1})
	ctx := context.Background()
	cl := c.Client(client.Config{})
	defer cl.Close()
	before := testkit.RandomBytes(t, 200<<10+17)
	testkit.WriteFile(t, cl, "/before", before, 1)

	dn := c.DNs[0]
	c.Stop(dn)
	c.Kill(c.NN)
	mark := testkit.LogSize(c.NN.Log)
	c.StartNamenode()

	wc := c.Client(client.Config{})
	defer wc.Close()
	data := testkit.RandomBytes(t, 3<<20+12345)
	done := make(chan error, 1)
	go func() {
		_, err := wc.CopyIn(ctx, bytes.NewReader(data), "/after", client.CopyOptions{Rep: 1})
		done <- err
	}()
	testkit.WaitUnavailableRefusal(t, c.NN.Log, mark, done)
	c.Continue(dn)
	testkit.MustOK(t, "write across the restart", <-done)

	rc := c.Client(client.Config{})
	defer rc.Close()
	if got := testkit.ReadFile(t, rc, "/after"); !bytes.Equal(got, data) {
		t.Fatalf("/after: read %d bytes, not the %d written", len(got), len(data))
	}
	if got := testkit.ReadFile(t, rc, "/before"); !bytes.Equal(got, before) {
		t.Fatalf("/before: read %d bytes, not the %d written", len(got), len(before))
	}
}

// TestAllocationRefusalNoWaitEndsFailsClearly checks the bounds of that
// wait: a replication more than the datanodes the namenode knows is
// refused at once; a datanode that never comes back is waited for
// Config.AllocWait ($PLASMAFS_ALLOC_WAIT for 'plasma put'), then the
// error names the namenode and what to do; the context's deadline ends
// the wait sooner.
func TestAllocationRefusalNoWaitEndsFailsClearly(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Datanodes: 1})
	guard, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	short := client.Config{AllocWait: 2 * time.Second}

	cl := c.Client(short)
	_, err := cl.CopyIn(guard, strings.NewReader("x"), "/rep2", client.CopyOptions{Rep: 2})
	cl.Close()
	if !errors.Is(err, client.ErrUnavailable) || !strings.Contains(err.Error(), "every datanode it knows is alive") {
		t.Fatalf("replication 2 on 1 datanode: want an immediate ErrUnavailable saying waiting would not help, got %v", err)
	}

	// The only datanode is gone for good; the restarted namenode knows it
	// but never hears from it.
	c.Kill(c.DNs[0])
	c.Kill(c.NN)
	c.StartNamenode()
	cl = c.Client(short)
	defer cl.Close()
	_, err = cl.CopyIn(guard, bytes.NewReader(testkit.RandomBytes(t, 100<<10)), "/never", client.CopyOptions{Rep: 1})
	if !errors.Is(err, client.ErrUnavailable) || guard.Err() != nil {
		t.Fatalf("datanode gone: want ErrUnavailable after the client's wait, got %v", err)
	}
	for _, want := range []string{"waited", c.NN.Addr, "plasma admin datanodes", "AllocWait"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("datanode gone: the error does not say %q: %v", want, err)
		}
	}

	// 'plasma put' says the same and exits non-zero; the wait is set by
	// the environment.
	out, code := c.RunEnv([]string{"PLASMAFS_ALLOC_WAIT=1s"}, []byte("some bytes"), "put", "-stdin", "/never-cli")
	if code == 0 || !strings.Contains(out, "waited") || !strings.Contains(out, "plasma admin datanodes") || strings.Contains(out, "goroutine") {
		t.Fatalf("plasma put with the datanode gone: exit %d, want a failure that says it waited and what to do:\n%s", code, out)
	}

	t.Logf("plasma put with the datanode gone (exit %d): %s", code, out)

	// The default wait (30 s) is cut short by the caller's deadline.
	dc := c.Client(client.Config{})
	defer dc.Close()
	soon, cancelSoon := context.WithTimeout(guard, time.Second)
	defer cancelSoon()
	_, err = dc.CopyIn(soon, bytes.NewReader(testkit.RandomBytes(t, 100<<10)), "/soon", client.CopyOptions{Rep: 1})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("datanode gone, context deadline 1s: the error does not say the deadline ended the wait: %v", err)
	}
}
