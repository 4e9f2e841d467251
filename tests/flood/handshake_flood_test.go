package flood

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/auth"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/internal/wire"
	"github.com/plasmafs/plasma/tests/testkit"
)

// handshakeFrom runs the client side of the handshake with the server at
// addr, from 127.0.0.1, as the holder of credFile.
func handshakeFrom(t *testing.T, addr string, level string, credFile string, want auth.Role) error {
	t.Helper()
	cred, err := auth.LoadCredential(credFile)
	if err != nil {
		t.Fatal(err)
	}
	lvl, err := auth.ParseLevel(level)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return err
	}
	defer nc.Close()
	_, err = auth.Client(nc, lvl, cred, want)
	return err
}

// TestNamenodeHandshakeFloodFromManySources: idle connections from a
// hundred addresses (as from a hundred machines, each under the
// per-address cap), more than the namenode's handshake slots, do not keep
// out a client that finishes its handshake promptly, while they are held
// open.
func TestNamenodeHandshakeFloodFromManySources(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{NamenodeArgs: []string{"-max-conns", "64"}})
	user := c.IssueCredential("alice", auth.RoleUser)
	flood := floodIdle(t, c.NN.Addr, 400, loopbackSources(100))
	if len(flood) < 300 {
		t.Fatalf("only %d of 400 flood connections connected", len(flood))
	}
	if err := handshakeFrom(t, c.NN.Addr, c.Opts.Security, user, auth.RoleNamenode); err != nil {
		t.Fatalf("handshake during a flood of %d idle connections from 100 addresses: %v", len(flood), err)
	}
	alice := c.Client(client.Config{CredentialFile: user})
	defer alice.Close()
	if err := alice.Ping(context.Background()); err != nil {
		t.Fatalf("request during a flood of idle connections from 100 addresses: %v", err)
	}
	admin := c.Client(client.Config{})
	defer admin.Close()
	if err := admin.Txn(context.Background(), func(ctx context.Context, tx *client.Txn) error {
		_, err := tx.Mkdir(ctx, "/during-flood", 0)
		return err
	}); err != nil {
		t.Fatalf("commit during a flood of idle connections from 100 addresses: %v", err)
	}
	if !c.NN.Running() {
		t.Fatal("namenode exited under the flood")
	}
}

// TestDatanodeHandshakeFloodFromManySources: the same at a datanode, whose
// handshake slots a flood from many addresses used to fill: a reader gets
// in while the flood is held open.
func TestDatanodeHandshakeFloodFromManySources(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Datanodes: 1})
	user := c.IssueCredential("alice", auth.RoleUser)
	cl := c.Client(client.Config{NoShortCircuit: true})
	defer cl.Close()
	data := testkit.RandomBytes(t, 3*int(c.Opts.Blocksize))
	testkit.WriteFile(t, cl, "/f", data, 1)
	flood := floodIdle(t, c.DNs[0].Addr, 1200, loopbackSources(100))
	if len(flood) < 1100 {
		t.Fatalf("only %d of 1200 flood connections connected", len(flood))
	}
	if err := handshakeFrom(t, c.DNs[0].Addr, c.Opts.DataSecurity, user, auth.RoleDatanode); err != nil {
		t.Fatalf("handshake during a flood of %d idle connections from 100 addresses: %v", len(flood), err)
	}
	fresh := c.Client(client.Config{NoShortCircuit: true, CredentialFile: user})
	defer fresh.Close()
	if got := testkit.ReadFile(t, fresh, "/f"); !bytes.Equal(got, data) {
		t.Fatal("read during a flood of idle datanode connections returned wrong data")
	}
	if !c.DNs[0].Running() {
		t.Fatal("datanode exited under the flood")
	}
}

// rssOf returns a process's resident memory in bytes (VmRSS).
func rssOf(t *testing.T, pid int) int64 {
	t.Helper()
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("VmRSS of %d: %q", pid, rest)
			}
			return kb << 10
		}
	}
	t.Fatalf("no VmRSS for process %d", pid)
	return 0
}

// peakRSS samples a process's resident memory until done closes and
// returns the most seen.
func peakRSS(t *testing.T, pid int, done <-chan struct{}) int64 {
	t.Helper()
	peak := rssOf(t, pid)
	for {
		select {
		case <-done:
			return max(peak, rssOf(t, pid))
		case <-time.After(20 * time.Millisecond):
			peak = max(peak, rssOf(t, pid))
		}
	}
}

// TestNamenodeRequestMemoryBounded: a hundred unauthenticated peers that
// each send all but the last byte of a 16 MiB request pin no more than
// the namenode's budget for requests arriving (they took it from 55 MB to
// 2.6 GB), and a client's small requests go on meanwhile.
func TestNamenodeRequestMemoryBounded(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Security: "none", DataSecurity: "none"})
	before := rssOf(t, c.NN.Pid())
	const peers = 100
	// Length, id and all of the payload but its last byte, the same for
	// every peer.
	frame := make([]byte, 4+wire.MaxFrame-1)
	binary.LittleEndian.PutUint32(frame, wire.MaxFrame)
	var wg sync.WaitGroup
	var conns []net.Conn
	defer func() { closeConns(conns) }()
	for i := 0; i < peers; i++ {
		nc, err := net.DialTimeout("tcp", c.NN.Addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, nc)
		if _, err := auth.Client(nc, auth.None, nil); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			// The namenode reads what its budget grants and then makes
			// the rest wait: the write deadline ends the flood. (Today's
			// whole 1.6 GB takes a few seconds.)
			nc.SetWriteDeadline(time.Now().Add(10 * time.Second))
			nc.Write(frame)
		}()
	}
	sent := make(chan struct{})
	go func() { wg.Wait(); close(sent) }()
	peak := make(chan int64, 1)
	go func() { peak <- peakRSS(t, c.NN.Pid(), sent) }()
	cl := c.Client(client.Config{})
	defer cl.Close()
	if err := cl.Txn(context.Background(), func(ctx context.Context, tx *client.Txn) error {
		_, err := tx.Mkdir(ctx, "/during-memory-flood", 0)
		return err
	}); err != nil {
		t.Fatalf("commit while %d peers hold incomplete 16 MiB requests: %v", peers, err)
	}
	grew := <-peak - before
	t.Logf("namenode RSS %d MiB before, grew by %d MiB", before>>20, grew>>20)
	if grew > 512<<20 {
		t.Fatalf("%d incomplete 16 MiB requests grew the namenode by %d MiB (its budget for requests arriving is 64 MiB)", peers, grew>>20)
	}
	if !c.NN.Running() {
		t.Fatal("namenode exited")
	}
}

// TestDatanodeReceiveMemoryBounded: a hundred peers with an ordinary
// user's credential that each announce a 16 MiB block write and send all
// of it but its last byte pin no more than the datanode's receive budget
// (64 MiB here), and a reader is served meanwhile.
func TestDatanodeReceiveMemoryBounded(t *testing.T) {
	const bs = 16 << 20
	c := clustertest.Start(t, clustertest.Options{Datanodes: 1, Blocksize: bs, Size: 64 << 20, DatanodeArgs: []string{"-receive-memory", "64M"}})
	cl := c.Client(client.Config{NoShortCircuit: true})
	defer cl.Close()
	data := testkit.RandomBytes(t, 100000)
	testkit.WriteFile(t, cl, "/f", data, 1)
	dn := c.DNs[0]
	before := rssOf(t, dn.Pid())
	cred, err := auth.LoadCredential(c.IssueCredential("mallory", auth.RoleUser))
	if err != nil {
		t.Fatal(err)
	}
	level, err := auth.ParseLevel(c.Opts.DataSecurity)
	if err != nil {
		t.Fatal(err)
	}
	// A write header and all of the block but its last byte, the same for
	// every peer (the ticket is checked once the data is in).
	write := append(wire.FrameDataHeader(&wire.DataReq{Op: wire.DataWrite, Length: bs, Ticket: []byte("forged")}), make([]byte, bs-1)...)
	const peers = 100
	var wg sync.WaitGroup
	var conns []net.Conn
	defer func() { closeConns(conns) }()
	for i := 0; i < peers; i++ {
		raw, err := net.DialTimeout("tcp", dn.Addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, raw)
		nc, err := auth.Client(raw, level, cred, auth.RoleDatanode)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			// The datanode reads what its budget grants and then makes
			// the rest wait: the write deadline ends the flood.
			raw.SetWriteDeadline(time.Now().Add(10 * time.Second))
			nc.Write(write)
		}()
	}
	sent := make(chan struct{})
	go func() { wg.Wait(); close(sent) }()
	peak := make(chan int64, 1)
	go func() { peak <- peakRSS(t, dn.Pid(), sent) }()
	fresh := c.Client(client.Config{NoShortCircuit: true})
	defer fresh.Close()
	if got := testkit.ReadFile(t, fresh, "/f"); !bytes.Equal(got, data) {
		t.Fatal("read while peers hold incomplete writes returned wrong data")
	}
	grew := <-peak - before
	t.Logf("datanode RSS %d MiB before, grew by %d MiB", before>>20, grew>>20)
	if grew > 512<<20 {
		t.Fatalf("%d incomplete 16 MiB writes grew the datanode by %d MiB (its receive budget is 64 MiB)", peers, grew>>20)
	}
	if !dn.Running() {
		t.Fatal("datanode exited")
	}
}
