package clustertest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/datanode"
	"github.com/plasmafs/plasma/internal/meta"
	"github.com/plasmafs/plasma/internal/namenode"
)

// Options shape a test cluster.
type Options struct {
	Datanodes int   // default 2
	Blocksize int64 // default 64 KiB
	Size      int64 // per datanode volume; default 256 MiB
	Cluster   string
	Relaxed   bool
	// Security and DataSecurity are the levels of namenode and datanode
	// traffic (default: the production defaults, privacy and auth).
	// In-process clusters always run at level none.
	Security     string
	DataSecurity string
	// NamenodeArgs are extra flags for the namenode process, DatanodeArgs
	// for each datanode process.
	NamenodeArgs []string
	DatanodeArgs []string
	// NamenodeFDLimit, if set, limits the namenode process's open files;
	// DatanodeFDLimit each datanode process's.
	NamenodeFDLimit int
	DatanodeFDLimit int
	// Admin gives every process an admin port (-admin-listen on a free
	// loopback port: Proc.AdminAddr).
	Admin bool
	// Sparse makes the datanode volumes of process clusters sparse
	// (datanode init -layout sparse) instead of fixed and fallocated.
	Sparse bool
}

// initLayoutArgs are the 'datanode init' flags for the volumes' layout.
func (o *Options) initLayoutArgs() []string {
	if o.Sparse {
		return []string{"-layout", "sparse"}
	}
	// -fallocate: instant volumes; tests do not measure write speed.
	return []string{"-fallocate"}
}

func (o *Options) defaults() {
	if o.Datanodes == 0 {
		o.Datanodes = 2
	}
	if o.Blocksize == 0 {
		o.Blocksize = 64 << 10
	}
	if o.Size == 0 {
		o.Size = 256 << 20
	}
	if o.Cluster == "" {
		o.Cluster = "test"
	}
	if o.Security == "" {
		o.Security = "privacy"
	}
	if o.DataSecurity == "" {
		o.DataSecurity = "auth"
	}
}

// InProcess is a cluster running inside the test process.
type InProcess struct {
	Addr string
	nn   *namenode.Namenode
	dns  []*datanode.Server
}

// TB is the part of testing.TB the helpers need (examples pass their own).
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
	Cleanup(func())
	TempDir() string
}

// StartInProcess starts a namenode and datanodes in this process.
func StartInProcess(t TB, o Options) *InProcess {
	t.Helper()
	o.defaults()
	dir := t.TempDir()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	store, err := meta.OpenSQLite(filepath.Join(dir, "nn.db"), o.Relaxed)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	nn, err := namenode.New(namenode.Config{Cluster: o.Cluster, Blocksize: uint32(o.Blocksize), Store: store, Fresh: true, Logger: quiet, Relaxed: o.Relaxed})
	if err != nil {
		t.Fatalf("namenode: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	go nn.Serve(ln)
	c := &InProcess{Addr: ln.Addr().String(), nn: nn}
	t.Cleanup(func() {
		for _, d := range c.dns {
			d.Close()
		}
		nn.Close()
		store.Close()
	})
	for i := 0; i < o.Datanodes; i++ {
		vol := filepath.Join(dir, fmt.Sprintf("dn%d", i+1))
		if _, err := datanode.InitWith(vol, o.Cluster, uint32(o.Blocksize), o.Size, datanode.PreallocFallocate); err != nil {
			t.Fatalf("datanode init: %v", err)
		}
		srv, err := datanode.Open(datanode.Config{Dir: vol, Namenode: c.Addr, Logger: quiet})
		if err != nil {
			t.Fatalf("datanode open: %v", err)
		}
		dln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("listen: %v", err)
		}
		go srv.Serve(dln)
		if err := srv.Register(context.Background(), dln.Addr().String(), ""); err != nil {
			t.Fatalf("datanode register: %v", err)
		}
		c.dns = append(c.dns, srv)
	}
	return c
}

// Client connects a new client to the cluster and closes it at cleanup.
func (c *InProcess) Client(t TB) *client.Client {
	t.Helper()
	cl, err := client.New(context.Background(), client.Config{Namenodes: []string{c.Addr}, Security: "none", DataSecurity: "none"})
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}
