package webhdfs

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestWebHDFSRangeReads (issue 26): OPEN with offset and length answers
// exactly the bytes of the range (Content-Length included) for ranges
// inside a block, across a block boundary, ending at one, at the end of
// the file and past it, and an empty range; and a range of a block or
// two (read at once) or more (streamed) costs the datanodes only the
// blocks it covers (their read_bytes_total, the gateway reading over
// TCP), not the eight blocks of read-ahead a streamed read fetches.
func TestWebHDFSRangeReads(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Admin: true})
	c.MustRun("chmod", "777", "/")
	t.Setenv("PLASMAFS_NO_SHORTCIRCUIT", "1") // blocks come from the datanodes, which count them
	g := startWebHDFS(t, c)
	const bs = 64 << 10 // the test cluster's blocksize
	data := testkit.RandomBytes(t, 20*bs+1234)
	if r := webhdfsDo(t, "PUT", g.url("/r", "CREATE", "user.name", "alice", "data", "true"), bytes.NewReader(data)); r.Status != 201 {
		t.Fatalf("CREATE /r: %d %s", r.Status, r.Body)
	}
	dnRead := func() float64 {
		sum := 0.0
		for _, dn := range c.DNs {
			sum += testkit.MetricSumOr0(testkit.Scrape(t, dn.AdminAddr), "plasma_datanode_read_bytes_total", nil)
		}
		return sum
	}
	size := int64(len(data))
	// The datanodes count a block once it is sent, which may be after
	// the gateway has answered: what they have counted after each range
	// is checked against the blocks of all the ranges so far, which a late
	// count can only undercount.
	start, covered := dnRead(), 0
	for _, r := range []struct {
		what        string
		off, length int64
		blocks      int // blocks the range covers
	}{
		{"inside a block", 3*bs + 100, 300, 1},
		{"a whole block", 5 * bs, bs, 1},
		{"across a block boundary", 7*bs - 10, 20, 2},
		{"two whole blocks", 8 * bs, 2 * bs, 2},
		{"three blocks' length, streamed", 12*bs + 10, 3 * bs, 4},
		{"four whole blocks, streamed", 16 * bs, 4 * bs, 4},
		{"ending at a block boundary", 11*bs - 5, 5, 1},
		{"the tail of the last block", 20*bs + 1000, 234, 1},
		{"past the end of the file", 20*bs + 1000, 5000, 1},
		{"empty", 4 * bs, 0, 0},
	} {
		resp := webhdfsGet(t, g.url("/r", "OPEN", "user.name", "alice", "offset", fmt.Sprint(r.off), "length", fmt.Sprint(r.length)))
		want := data[r.off:min(size, r.off+r.length)]
		if resp.Status != 200 || !bytes.Equal(resp.Body, want) {
			t.Errorf("OPEN %s (offset %d length %d): status %d, %d bytes, want the %d bytes of the range", r.what, r.off, r.length, resp.Status, len(resp.Body), len(want))
		}
		if resp.ContentLength != int64(len(want)) {
			t.Errorf("OPEN %s: Content-Length %d, want %d", r.what, resp.ContentLength, len(want))
		}
		covered += r.blocks
		if read := dnRead() - start; read > float64(covered*bs) {
			t.Errorf("OPEN %s: the datanodes have read %.0f bytes (%.1f blocks) for the ranges so far, which cover %d block(s)", r.what, read, read/bs, covered)
		}
	}
	// An open-ended read from an offset still streams the rest.
	resp := webhdfsGet(t, g.url("/r", "OPEN", "user.name", "alice", "offset", fmt.Sprint(2*bs+7)))
	if resp.Status != 200 || !bytes.Equal(resp.Body, data[2*bs+7:]) || resp.ContentLength != size-(2*bs+7) {
		t.Errorf("OPEN from offset %d to the end: status %d, %d bytes (Content-Length %d), want %d", 2*bs+7, resp.Status, len(resp.Body), resp.ContentLength, size-(2*bs+7))
	}
	// An offset past the end is Hadoop's EOFException, whatever the length.
	for _, length := range []string{"10", ""} {
		r := webhdfsDo(t, "GET", g.url("/r", "OPEN", "user.name", "alice", "offset", fmt.Sprint(size+1), "length", length), nil)
		wantException(t, "OPEN past the end, length "+length, r, 403, "EOFException")
	}
}

// getReply is the answer to a GET with its Content-Length (-1: none).
type getReply struct {
	Status        int
	Body          []byte
	ContentLength int64
}

// webhdfsGet sends a GET and reads the whole answer.
func webhdfsGet(t *testing.T, u string) getReply {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: reading the answer: %v", u, err)
	}
	return getReply{Status: resp.StatusCode, Body: b, ContentLength: resp.ContentLength}
}
