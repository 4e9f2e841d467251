package webhdfs

import (
	"bytes"
	"io"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/plasmafs/plasma/internal/clustertest"
)

// raggedReader hands out its data in pieces of odd sizes, as a slow
// network delivers an upload.
type raggedReader struct {
	data []byte
	rng  *rand.Rand
}

func (r *raggedReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := min(len(p), len(r.data), 1+r.rng.IntN(70000))
	copy(p, r.data[:n])
	r.data = r.data[n:]
	return n, nil
}

// TestWebHDFSUploadInPieces: CREATE and APPEND bodies that arrive in
// ragged pieces (chunked, no length), spanning several blocks and ending
// and starting mid-block, are stored byte for byte: the gateway gathers
// them into whole blocks before writing, and what it reads back with OPEN
// (whole and in ranges across block boundaries) and 'plasma cat' shows
// are the bytes sent.
func TestWebHDFSUploadInPieces(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{}) // 64 KiB blocks
	c.MustRun("chmod", "777", "/")
	g := startWebHDFS(t, c)
	rng := rand.New(rand.NewPCG(26, 1))
	first := make([]byte, 2<<20+(1<<19)+3)
	second := make([]byte, 1<<20+(300<<10)+5)
	for _, b := range [][]byte{first, second} {
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
	}
	u := func(op string, kv ...string) string {
		return g.url("/up/file", op, append([]string{"user.name", "alice"}, kv...)...)
	}
	if r := webhdfsDo(t, "PUT", u("CREATE", "data", "true"), &raggedReader{data: first, rng: rng}); r.Status != 201 {
		t.Fatalf("CREATE: %d %s", r.Status, r.Body)
	}
	if r := webhdfsDo(t, "POST", u("APPEND", "data", "true"), &raggedReader{data: second, rng: rng}); r.Status != 200 {
		t.Fatalf("APPEND: %d %s", r.Status, r.Body)
	}
	want := append(append([]byte(nil), first...), second...)
	if r := webhdfsDo(t, "GET", u("OPEN"), nil); r.Status != 200 || !bytes.Equal(r.Body, want) {
		t.Fatalf("OPEN: status %d, %d bytes, want the %d bytes sent", r.Status, len(r.Body), len(want))
	}
	for _, rg := range [][2]int{{65535, 3}, {len(first) - 10, 70000}, {len(want) - 100, 100}} {
		r := webhdfsDo(t, "GET", u("OPEN", "offset", strconv.Itoa(rg[0]), "length", strconv.Itoa(rg[1])), nil)
		if r.Status != 200 || !bytes.Equal(r.Body, want[rg[0]:rg[0]+rg[1]]) {
			t.Errorf("OPEN offset %d length %d: status %d, %d bytes not the ones sent", rg[0], rg[1], r.Status, len(r.Body))
		}
	}
	if got := c.MustRun("cat", "/up/file"); got != string(want) {
		t.Errorf("plasma cat shows %d bytes, not the %d sent", len(got), len(want))
	}
}
