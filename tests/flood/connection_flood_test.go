package flood

import (
	"bytes"
	"context"
	"net"
	"testing"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/auth"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/internal/wire"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestConnectionFlood: idle connections that never finish their handshake,
// from one address and more than the namenode has file descriptors, do not
// stop the namenode nor keep others out.
func TestConnectionFlood(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{NamenodeFDLimit: 256})
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 3)}, Timeout: 5 * time.Second}
	var flood []net.Conn
	defer func() {
		for _, fc := range flood {
			fc.Close()
		}
	}()
	for i := 0; i < 400; i++ {
		fc, err := d.Dial("tcp", c.NN.Addr)
		if err != nil {
			continue // refused or the backlog is full: that is the namenode defending itself
		}
		flood = append(flood, fc)
	}
	if len(flood) == 0 {
		t.Fatal("no flood connection got through to the namenode at all")
	}
	// While the flood holds its connections, others are served.
	cl := c.Client(client.Config{})
	defer cl.Close()
	ctx := context.Background()
	if err := cl.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
		_, err := tx.Mkdir(ctx, "/during-flood", 0)
		return err
	}); err != nil {
		t.Fatalf("commit during a flood of idle connections: %v", err)
	}
	if !c.NN.Running() {
		t.Fatal("namenode exited under the flood")
	}
}

// TestUserConnectionLimit: one user's many connections hit the user's
// limit; the superuser and the datanodes still get in.
func TestUserConnectionLimit(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{NamenodeArgs: []string{"-max-conns-per-user", "20", "-max-conns", "40"}})
	cred := c.IssueCredential("mallory", auth.RoleUser)
	var held []*client.Client
	defer func() {
		for _, h := range held {
			h.Close()
		}
	}()
	ctx := context.Background()
	refused := 0
	for i := 0; i < 30; i++ {
		h, err := client.New(ctx, client.Config{Namenodes: []string{c.NN.Addr}, CredentialFile: cred, KeepaliveInterval: -1})
		if err != nil {
			refused++
			continue
		}
		held = append(held, h)
		if err := h.Ping(ctx); err != nil {
			refused++
		}
	}
	if refused != 10 {
		t.Fatalf("%d of mallory's 30 connections refused, want 10 (limit 20 per user)", refused)
	}
	admin := c.Client(client.Config{})
	defer admin.Close()
	if err := admin.Ping(ctx); err != nil {
		t.Fatalf("superuser locked out by a user's connections: %v", err)
	}
	// A datanode restarting while the user holds connections registers.
	c.Kill(c.DNs[0])
	c.StartDatanode(c.DNs[0])
	c.WaitLive(2)
	_ = wire.OpPing
}

// TestDatanodeConnectionFlood: idle connections to a datanode that never
// finish their handshake, more than its connection limit, do not keep
// readers out.
func TestDatanodeConnectionFlood(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Datanodes: 1})
	cl := c.Client(client.Config{NoShortCircuit: true})
	defer cl.Close()
	data := testkit.RandomBytes(t, 3*int(c.Opts.Blocksize))
	testkit.WriteFile(t, cl, "/f", data, 1)
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 3)}, Timeout: 5 * time.Second}
	var flood []net.Conn
	defer func() {
		for _, fc := range flood {
			fc.Close()
		}
	}()
	for i := 0; i < 1100; i++ {
		fc, err := d.Dial("tcp", c.DNs[0].Addr)
		if err != nil {
			continue
		}
		flood = append(flood, fc)
	}
	fresh := c.Client(client.Config{NoShortCircuit: true})
	defer fresh.Close()
	if got := testkit.ReadFile(t, fresh, "/f"); !bytes.Equal(got, data) {
		t.Fatal("read during a flood of idle datanode connections returned wrong data")
	}
}
