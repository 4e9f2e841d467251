package webhdfs

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestWebHDFSOpenNeverServesDamagedReplica (issue 26, OPEN speed): a
// block damaged on a datanode's disk is never part of an OPEN's answer,
// through the gateway's block buffers (pooled and reused from one OPEN to
// the next) and whether it reads the block files directly (short-circuit,
// as on a datanode host) or from the datanodes over TCP. With a good
// replica elsewhere, whole-file OPENs, streamed ranges and ranges read at
// once are byte-exact; with none, a range read at once is an error and a
// streamed OPEN ends short, after exactly the blocks before the damaged
// one; and later OPENs of another file are byte-exact again.
func TestWebHDFSOpenNeverServesDamagedReplica(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	c.MustRun("chmod", "777", "/")
	cl := c.Client(client.Config{})
	defer cl.Close()
	const bs = 64 << 10 // the test cluster's blocksize
	const damagedBlock = 3
	two := testkit.RandomBytes(t, 12*bs+777)
	one := testkit.RandomBytes(t, 12*bs+777)
	testkit.WriteFile(t, cl, "/two", two, 2)
	testkit.WriteFile(t, cl, "/one", one, 1)
	flipVolumeByte(t, c, cl, "/two", damagedBlock, 0) // its first replica: the one read first
	flipVolumeByte(t, c, cl, "/one", damagedBlock, 0)

	local := startWebHDFS(t, c)
	t.Setenv("PLASMAFS_NO_SHORTCIRCUIT", "1")
	remote := startWebHDFS(t, c)
	for _, g := range []struct {
		name string
		gw   *webhdfsGateway
	}{{"short-circuit", local}, {"over TCP", remote}} {
		open := func(name string, kv ...string) (status int, body []byte, readErr error) {
			t.Helper()
			resp, err := http.Get(g.gw.url(name, "OPEN", append([]string{"user.name", "alice"}, kv...)...))
			if err != nil {
				t.Fatalf("%s: OPEN %s %v: %v", g.name, name, kv, err)
			}
			defer resp.Body.Close()
			body, readErr = io.ReadAll(resp.Body)
			return resp.StatusCode, body, readErr
		}
		exact := func(name string, want []byte, kv ...string) {
			t.Helper()
			st, body, err := open(name, kv...)
			if st != 200 || err != nil || !bytes.Equal(body, want) {
				t.Errorf("%s: OPEN %s %v: status %d, %d bytes (%v), want the %d bytes of the file", g.name, name, kv, st, len(body), err, len(want))
			}
		}
		// A good replica elsewhere: the answer is the file's bytes.
		exact("/two", two)
		exact("/two", two[bs+9:], "offset", fmt.Sprint(bs+9))
		exact("/two", two[2*bs+1:7*bs], "offset", fmt.Sprint(2*bs+1), "length", fmt.Sprint(5*bs-1))
		exact("/two", two[damagedBlock*bs+100:damagedBlock*bs+400], "offset", fmt.Sprint(damagedBlock*bs+100), "length", "300")

		// No good replica: a range read at once is an error.
		if st, body, _ := open("/one", "offset", fmt.Sprint(damagedBlock*bs+100), "length", "300"); st == 200 {
			t.Errorf("%s: OPEN of a range in the damaged block of /one: status 200 with %d bytes, want an error", g.name, len(body))
		}
		// Streamed: the status went out before the block was read, so
		// the body ends short, with the blocks before the damaged one.
		for _, off := range []int{0, bs + 9} {
			st, body, err := open("/one", "offset", fmt.Sprint(off))
			if st == 200 && (err == nil || !bytes.Equal(body, one[off:damagedBlock*bs])) {
				t.Errorf("%s: OPEN /one from %d: %d bytes (read error %v), want the %d bytes before the damaged block and a read error",
					g.name, off, len(body), err, damagedBlock*bs-off)
			}
		}
		// The buffers that held damaged bytes serve other reads.
		exact("/two", two)
		exact("/two", two[5*bs:5*bs+bs], "offset", fmt.Sprint(5*bs), "length", fmt.Sprint(bs))
	}
	if !local.running() || !remote.running() {
		t.Fatal("a gateway stopped")
	}
}

// flipVolumeByte flips a byte of block idx of file p on replica r (in the
// order the namenode lists them) in its datanode's volume file: damage on
// disk that only the block's checksum reveals.
func flipVolumeByte(t *testing.T, c *clustertest.Procs, cl *client.Client, p string, idx uint64, r int) {
	t.Helper()
	var addr string
	var block uint64
	err := cl.Txn(context.Background(), func(ctx context.Context, tx *client.Txn) error {
		fi, err := tx.Lookup(ctx, p)
		if err != nil {
			return err
		}
		xs, err := tx.Blocks(ctx, fi.Ino)
		if err != nil {
			return err
		}
		for _, x := range xs {
			if x.Index <= idx && idx < x.Index+uint64(x.Count) {
				addr, block = x.Replicas[r].Addr, x.Replicas[r].Start+idx-x.Index
			}
		}
		return nil
	})
	if err != nil || addr == "" {
		t.Fatalf("replica %d of block %d of %s: %v", r, idx, p, err)
	}
	var dir string
	for _, d := range c.DNs {
		if d.Addr == addr {
			dir = d.Dir
		}
	}
	f, err := os.OpenFile(filepath.Join(dir, "data"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	off := int64(block)*c.Opts.Blocksize + 1000
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x5a
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}
