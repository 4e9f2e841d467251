package datanode_test

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"testing"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/auth"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/internal/datanode"
	"github.com/plasmafs/plasma/internal/wire"
)

// TestReplicateKeepsBlocksInFlight: a datanode asked to re-replicate
// several blocks to one destination sends the next block before the
// destination has answered the previous one. The destination here
// answers only once it has received two blocks: a source that waited for
// each answer before sending the next would never get one (the exchange
// fails at its deadline instead of answering both).
func TestReplicateKeepsBlocksInFlight(t *testing.T) {
	c := clustertest.StartInProcess(t, clustertest.Options{Datanodes: 1})
	cl := c.Client(t)
	ctx := context.Background()
	bs := 64 << 10
	data := bytes.Repeat([]byte("in flight "), 2*bs/10+1)[:2*bs]
	if _, err := cl.CopyIn(ctx, bytes.NewReader(data), "/f", client.CopyOptions{Rep: 1}); err != nil {
		t.Fatal(err)
	}
	var x client.Extent
	err := cl.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
		fi, err := tx.Lookup(ctx, "/f")
		if err != nil {
			return err
		}
		xs, err := tx.Blocks(ctx, fi.Ino)
		if err != nil {
			return err
		}
		if len(xs) != 1 || xs[0].Count != 2 || len(xs[0].Replicas) != 1 {
			t.Fatalf("blocks of /f: %+v, want one extent of 2 blocks on one datanode", xs)
		}
		x = xs[0]
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	src := x.Replicas[0]

	// The destination: reads two writes, then answers both.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan error, 1)
	go func() {
		raw, err := ln.Accept()
		if err != nil {
			got <- err
			return
		}
		defer raw.Close()
		nc, _, err := auth.Server(raw, auth.None, nil)
		if err != nil {
			got <- err
			return
		}
		raw.SetDeadline(time.Now().Add(20 * time.Second)) // after the handshake, which clears it
		r := bufio.NewReader(nc)
		for range 2 {
			q, err := wire.ReadDataReq(r, nil)
			if err == nil {
				_, err = io.CopyN(io.Discard, r, int64(q.Length))
			}
			if err != nil {
				got <- err
				return
			}
		}
		for range 2 {
			if err := wire.WriteDataResp(nc, &wire.DataResp{}); err != nil {
				got <- err
				return
			}
		}
		got <- nil
	}()

	// The namenode's side: two replicate requests on one connection.
	raw, err := net.Dial("tcp", src.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	nc, err := auth.Client(raw, auth.None, nil, auth.RoleDatanode)
	if err != nil {
		t.Fatal(err)
	}
	raw.SetDeadline(time.Now().Add(20 * time.Second)) // a bound on failure, not a measurement
	w := bufio.NewWriter(nc)
	for k := range uint64(2) {
		q := &wire.DataReq{Op: wire.DataReplicate, Block: src.Start + k, CRC: datanode.Checksum(data[int(k)*bs:int(k+1)*bs], bs),
			Chain: []wire.Hop{{Addr: ln.Addr().String(), Block: 100 + k}}}
		if err := wire.WriteDataReq(w, q); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(nc)
	for k := range 2 {
		p, err := wire.ReadDataResp(r)
		if err != nil {
			t.Fatalf("answer to block %d: %v (the source waits for each block's answer before sending the next)", k, err)
		}
		if p.Status != wire.OK {
			t.Fatalf("answer to block %d: %s", k, p.Msg)
		}
	}
	if err := <-got; err != nil {
		t.Fatalf("destination: %v", err)
	}
}
