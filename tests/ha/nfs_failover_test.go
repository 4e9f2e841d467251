package ha

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/plasmafs/plasma/tests/testkit"
)

// groupEnv is the environment of a plasma command given the group's
// namenode list (and no configuration file).
func (g *group) groupEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PLASMAFS_") {
			env = append(env, kv)
		}
	}
	return append(env, "PLASMAFS_NAMENODES="+strings.Join(g.addrs(), ","), "PLASMAFS_CONFIG="+filepath.Join(g.dir, "no-config"),
		"PLASMAFS_SECURITY=none", "PLASMAFS_DATA_SECURITY=none")
}

// Issue 22: the NFS bridge, given the namenode list, rides through a
// failover as a mount does: after the leader's kill -9, a file written
// through it before reads back, and a new file is written and read back
// through the same NFS client, without an error.
func TestNFSRidesThroughFailover(t *testing.T) {
	g := startGroup(t, 3, 1)
	b := testkit.StartNFSWith(t, g.bin, g.groupEnv(), "-listen", "127.0.0.1:0", "-no-root-squash")
	tg := testkit.DialNFS(t, b.Addr)
	write := func(name string, data []byte) error {
		f, err := tg.OpenFile("/"+name, 0o644)
		if err != nil {
			return err
		}
		if _, err := f.Write(data); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	}
	before := testkit.SeededBytes(300_000, 1)
	testkit.MustOK(t, "write through NFS", write("before", before))
	g.kill(g.leader())
	// The bridge waits for a namenode as a hard mount does: a bridge
	// that cannot find the new leader would never answer.
	done := make(chan error, 1)
	go func() {
		if got, err := testkit.NFSReadFile(tg, "before"); err != nil || !bytes.Equal(got, before) {
			done <- fmt.Errorf("read through NFS after the failover: %d bytes, %v", len(got), err)
			return
		}
		after := testkit.SeededBytes(300_000, 2)
		if err := write("after", after); err != nil {
			done <- fmt.Errorf("write through NFS after the failover: %w", err)
			return
		}
		if got, err := testkit.NFSReadFile(tg, "after"); err != nil || !bytes.Equal(got, after) {
			done <- fmt.Errorf("read back through NFS: %d bytes, %v", len(got), err)
			return
		}
		done <- nil
	}()
	select {
	case err := <-done:
		testkit.MustOK(t, "NFS across the failover", err)
	case <-time.After(2 * time.Minute):
		// Goroutine dumps of this process (the NFS client) and of the
		// bridge (SIGQUIT; on the test's stderr) show which side waits,
		// and where.
		pprof.Lookup("goroutine").WriteTo(os.Stderr, 2)
		b.Cmd.Process.Signal(syscall.SIGQUIT)
		<-b.Done
		t.Fatalf("the NFS bridge does not answer 2 minutes after the leader's kill -9")
	}
}
