package posix

import (
	"context"
	"encoding/binary"
	"strconv"
	"testing"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clientx"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
	nfsc "github.com/willscott/go-nfs-client/nfs"
	"github.com/willscott/go-nfs-client/nfs/rpc"
	"github.com/willscott/go-nfs-client/nfs/xdr"
)

// TestNFSExportIsABoundary: a bridge exporting /pub serves nothing
// outside it, here a world-readable file /outside, to a client that
// makes up a file handle for its inode (handles were bare inode numbers)
// or that LOOKUPs a name the bridge takes for an inode number
// ("\x00" + the number); the handles it gives out work.
func TestNFSExportIsABoundary(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	c.MustRun("mkdir", "/pub")
	testkit.PutOwned(t, c, "/pub/inside", "inside the export\n", "", "644")
	testkit.PutOwned(t, c, "/outside", "outside the export\n", "", "644")
	cl := c.Client(client.Config{})
	defer cl.Close()
	fi, err := clientx.Auto(cl, clientx.Durable).Lstat(context.Background(), "/outside")
	testkit.MustOK(t, "stat /outside", err)
	b := testkit.StartNFSArgs(t, c, "-listen", "127.0.0.1:0", "-export", "/pub")
	tg := testkit.DialNFSAs(t, b.Addr, rpc.NewAuthUnix("client", 1000, 1000).Auth())

	// The handles the bridge gives out work.
	f, err := tg.Open("/inside")
	testkit.MustOK(t, "open /inside in the export", err)
	buf := make([]byte, 64)
	n, _ := f.Read(buf)
	if string(buf[:n]) != "inside the export\n" {
		t.Fatalf("read /inside through the export: %q", buf[:n])
	}

	// A handle made up for /outside's inode, as the bridge made them.
	forged := make([]byte, 20)
	forged[0] = 1
	binary.BigEndian.PutUint64(forged[4:], fi.Ino)
	if data, ok := nfsRawRead(t, tg, forged); ok {
		t.Errorf("a made-up handle of an inode outside the export read it: %q", data)
	}

	// LOOKUP of "\x00INO" in the export's root.
	_, rootFH, err := tg.Lookup("/")
	testkit.MustOK(t, "lookup of the export", err)
	type lookupArgs struct {
		rpc.Header
		FH   []byte
		Name string
	}
	h := nfsHeader(nfsc.NFSProc3Lookup)
	h.Cred = rpc.NewAuthUnix("client", 1000, 1000).Auth()
	res, err := tg.Call(&lookupArgs{h, rootFH, "\x00" + strconv.FormatUint(fi.Ino, 10)})
	testkit.MustOK(t, "LOOKUP call", err)
	if nfsStatusErr(res) == nil {
		fh, err := xdr.ReadOpaque(res)
		testkit.MustOK(t, "LOOKUP reply", err)
		if data, ok := nfsRawRead(t, tg, fh); ok {
			t.Errorf("LOOKUP of an inode number in the export gave a handle that reads %q outside it", data)
		}
	}
}

// nfsRawRead sends READ3 for the first 100 bytes of handle fh as uid
// 1000 and returns the data if the bridge answered with it.
func nfsRawRead(t *testing.T, tg *nfsc.Target, fh []byte) ([]byte, bool) {
	t.Helper()
	type args struct {
		rpc.Header
		FH     []byte
		Offset uint64
		Count  uint32
	}
	h := nfsHeader(nfsc.NFSProc3Read)
	h.Cred = rpc.NewAuthUnix("client", 1000, 1000).Auth()
	res, err := tg.Call(&args{h, fh, 0, 100})
	if err != nil {
		return nil, false // refused at the RPC level
	}
	if err := nfsStatusErr(res); err != nil {
		return nil, false
	}
	var body struct {
		Attr  nfsc.PostOpAttr
		Count uint32
		EOF   uint32
		Data  []byte
	}
	if err := xdr.Read(res, &body); err != nil {
		t.Fatalf("READ reply: %v", err)
	}
	return body.Data, true
}
