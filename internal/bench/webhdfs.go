package bench

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/user"
	"path/filepath"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/webhdfs"
)

// WebHDFSOptions are the parameters of the WebHDFS gateway benchmark.
type WebHDFSOptions struct {
	Size    int64 // bytes of the file written and read
	Runs    int   // repetitions (medians reported)
	Entries int   // entries of the listed directory
	// SmallOpens is how many OPENs of a small file each run times beside
	// as many gets of it (0: none).
	SmallOpens int
	LocalDir   string // where the local source and copies go
}

// webhdfsBenchDir is the PlasmaFS directory the benchmark works in.
const webhdfsBenchDir = "/plasma-bench-webhdfs"

// WebHDFS measures a gateway serving c, started in this process on
// loopback: a file written with the two-step CREATE (one stream) beside
// the same bytes put with the client's CopyIn ('plasma put'), and one
// PlasmaFS file read with OPEN beside the same file got with WriteTo
// ('plasma get'), each side into a new local file (the previous copy
// removed untimed, so that neither side pays for truncating the other's
// dirty pages), which side of a pair goes first alternating; then listing
// a directory of o.Entries files with one LISTSTATUS beside o.Entries
// GETFILESTATUS requests (over one keep-alive connection).
func WebHDFS(ctx context.Context, c *client.Client, o WebHDFSOptions) (*Report, error) {
	rep := &Report{Bench: "webhdfs", Started: time.Now(), Params: fmt.Sprintf("size=%d runs=%d entries=%d localdir=%s", o.Size, o.Runs, o.Entries, o.LocalDir)}
	src := filepath.Join(o.LocalDir, "plasma-bench-webhdfs-src")
	if err := makeRandomFile(src, o.Size); err != nil {
		return nil, err
	}
	defer os.Remove(src)
	dst := filepath.Join(o.LocalDir, "plasma-bench-webhdfs-copy")
	defer os.Remove(dst)
	gw, err := startGateway(c)
	if err != nil {
		return nil, err
	}
	defer gw.stop()
	if err := makeOpenDir(ctx, c, webhdfsBenchDir); err != nil {
		return nil, err
	}
	defer removeBenchTree(context.WithoutCancel(ctx), c, gw, webhdfsBenchDir)

	pairs := newPairedRates(o.Size)
	pairs.beforeEach = func() error { return removeLocal(dst) }
	native, viaGW := webhdfsBenchDir+"/put", webhdfsBenchDir+"/create"
	for run := 0; run < o.Runs; run++ {
		removeIfExists(ctx, c, native)
		put := func() error { return putFile(ctx, c, src, native) }
		if err := pairs.runOrdered("write", run%2 == 1, put, func() error { return gw.create(viaGW, src, o.Size) }); err != nil {
			return nil, err
		}
		// Both sides read the same file (the one put above), from the
		// same page cache state but for what the first leaves the second.
		get := func() error { return getToFile(ctx, c, native, dst) }
		if err := pairs.runOrdered("read", run%2 == 1, get, func() error { return gw.open(native, dst) }); err != nil {
			return nil, err
		}
	}
	for _, k := range []struct{ key, name, ref string }{
		{"write", "WebHDFS CREATE (two-step, one stream)", "plasma put (CopyIn)"},
		{"read", "WebHDFS OPEN", "plasma get (WriteTo)"},
	} {
		pairs.add(rep, k.key, Result{Name: k.name, RefName: k.ref, Note: "ratio: median of per-pair ratios (goal ≥ 0.7): " + pairs.pairRatios(k.key) + "; " + pairs.cpuNote(k.key)})
	}
	if o.SmallOpens > 0 {
		if err := benchSmallOpens(ctx, c, gw, rep, o); err != nil {
			return nil, err
		}
	}
	if err := benchListing(ctx, c, gw, rep, o); err != nil {
		return nil, err
	}
	return rep, nil
}

// smallOpenSize is the size of the file benchSmallOpens reads.
const smallOpenSize = 4 << 10

// benchSmallOpens times o.SmallOpens OPENs of a file of smallOpenSize
// bytes beside as many gets of it (each a transaction, an open and
// WriteTo, as 'plasma get' does), both read into memory, which of the two
// goes first alternating: what a request costs the gateway beyond the
// read itself.
func benchSmallOpens(ctx context.Context, c *client.Client, gw *gateway, rep *Report, o WebHDFSOptions) error {
	name := webhdfsBenchDir + "/small"
	data := make([]byte, smallOpenSize)
	if _, err := rand.Read(data); err != nil {
		return err
	}
	if _, err := c.CopyIn(ctx, bytes.NewReader(data), name, client.CopyOptions{}); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	opens := func() error {
		for range o.SmallOpens {
			resp, err := gw.do(http.MethodGet, gw.url(name, "OPEN"), nil, 0, http.StatusOK)
			if err != nil {
				return err
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				return err
			}
			if !bytes.Equal(b, data) {
				return fmt.Errorf("OPEN %s: %d bytes, not the %d written", name, len(b), len(data))
			}
		}
		return nil
	}
	gets := func() error {
		var b bytes.Buffer
		for range o.SmallOpens {
			b.Reset()
			if err := getTo(ctx, c, name, &b); err != nil {
				return err
			}
		}
		return nil
	}
	var ours, refs []float64
	for run := 0; run < o.Runs; run++ {
		first, second := opens, gets
		if run%2 == 1 {
			first, second = gets, opens
		}
		d1, err := timeIt(first)
		if err != nil {
			return err
		}
		d2, err := timeIt(second)
		if err != nil {
			return err
		}
		if run%2 == 1 {
			d1, d2 = d2, d1
		}
		ours, refs = append(ours, d1.Seconds()), append(refs, d2.Seconds())
	}
	rep.add(Result{Name: fmt.Sprintf("%d OPENs of a %d-byte file", o.SmallOpens, smallOpenSize), Unit: "ms", Ours: 1000 * median(ours),
		RefName: fmt.Sprintf("%d gets (WriteTo)", o.SmallOpens), Ref: 1000 * median(refs), Note: "ratio: time (no goal; medians)"})
	return nil
}

// benchListing times one LISTSTATUS of a directory of o.Entries files
// beside a GETFILESTATUS of each entry.
func benchListing(ctx context.Context, c *client.Client, gw *gateway, rep *Report, o WebHDFSOptions) error {
	dir := webhdfsBenchDir + "/list"
	if err := createEmptyFiles(ctx, c, dir, o.Entries); err != nil {
		return err
	}
	var lists, stats []float64
	for run := 0; run < o.Runs; run++ {
		d, err := timeIt(func() error { return gw.list(dir, o.Entries) })
		if err != nil {
			return err
		}
		lists = append(lists, d.Seconds())
		if d, err = timeIt(func() error { return gw.statEach(dir, o.Entries) }); err != nil {
			return err
		}
		stats = append(stats, d.Seconds())
	}
	rep.add(Result{Name: fmt.Sprintf("LISTSTATUS of %d entries", o.Entries), Unit: "ms", Ours: 1000 * median(lists),
		RefName: fmt.Sprintf("%d GETFILESTATUS", o.Entries), Ref: 1000 * median(stats), Note: "ratio: time (goal < 0.2)"})
	return nil
}

// gateway is a WebHDFS gateway served by this process on loopback, and
// an HTTP client for it acting as the current user.
type gateway struct {
	base   string // http://127.0.0.1:PORT/webhdfs/v1
	user   string
	http   *http.Client
	srv    *http.Server
	served chan error
}

func startGateway(c *client.Client) (*gateway, error) {
	u, err := user.Current()
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	g := &gateway{base: "http://" + l.Addr().String() + webhdfs.Prefix, user: u.Username, served: make(chan error, 1),
		srv: webhdfs.New(c, webhdfs.Options{}).Server()}
	// The client follows no redirect by itself: CREATE's is followed by
	// hand, as Hadoop's client does, with the body sent only the second
	// time.
	g.http = &http.Client{
		Transport:     &http.Transport{WriteBufferSize: 256 << 10, ReadBufferSize: 256 << 10, MaxIdleConnsPerHost: 4},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	go func() { g.served <- g.srv.Serve(l) }()
	return g, nil
}

func (g *gateway) stop() {
	g.srv.Close()
	<-g.served
}

func (g *gateway) url(path, op string, kv ...string) string {
	q := url.Values{"op": {op}, "user.name": {g.user}}
	for i := 0; i+1 < len(kv); i += 2 {
		q.Set(kv[i], kv[i+1])
	}
	return g.base + path + "?" + q.Encode()
}

// do sends a request and checks its status; it returns the response with
// its body open (the caller closes it).
func (g *gateway) do(method, u string, body io.Reader, size int64, want int) (*http.Response, error) {
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.ContentLength = size
		req.Header.Set("Content-Type", "application/octet-stream")
	}
	resp, err := g.http.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != want {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		return nil, fmt.Errorf("%s %s: status %d, want %d: %s", method, u, resp.StatusCode, want, b)
	}
	return resp, nil
}

// create writes the local file src to path with the two-step CREATE.
func (g *gateway) create(path, src string, size int64) error {
	resp, err := g.do(http.MethodPut, g.url(path, "CREATE", "overwrite", "true"), nil, 0, http.StatusTemporaryRedirect)
	if err != nil {
		return err
	}
	resp.Body.Close()
	loc := resp.Header.Get("Location")
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	if resp, err = g.do(http.MethodPut, loc, f, size, http.StatusCreated); err != nil {
		return err
	}
	io.Copy(io.Discard, resp.Body)
	return resp.Body.Close()
}

// open reads path into the local file dst.
func (g *gateway) open(path, dst string) error {
	resp, err := g.do(http.MethodGet, g.url(path, "OPEN"), nil, 0, http.StatusOK)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	f, err := os.Create(dst)
	if err != nil {
		return err
	}
	// Through Write only: the file's ReadFrom would copy in 32 KiB pieces.
	if _, err := io.CopyBuffer(struct{ io.Writer }{f}, resp.Body, make([]byte, 1<<20)); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// list lists dir with LISTSTATUS and checks that it has n entries.
func (g *gateway) list(dir string, n int) error {
	resp, err := g.do(http.MethodGet, g.url(dir, "LISTSTATUS"), nil, 0, http.StatusOK)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var l struct {
		FileStatuses struct{ FileStatus []json.RawMessage }
	}
	if err := json.NewDecoder(resp.Body).Decode(&l); err != nil {
		return fmt.Errorf("LISTSTATUS %s: %w", dir, err)
	}
	if got := len(l.FileStatuses.FileStatus); got != n {
		return fmt.Errorf("LISTSTATUS %s: %d entries, want %d", dir, got, n)
	}
	return nil
}

// statEach asks GETFILESTATUS of each of dir's n entries.
func (g *gateway) statEach(dir string, n int) error {
	for i := 0; i < n; i++ {
		resp, err := g.do(http.MethodGet, g.url(fmt.Sprintf("%s/f%05d", dir, i), "GETFILESTATUS"), nil, 0, http.StatusOK)
		if err != nil {
			return err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	return nil
}

// makeOpenDir makes dir (new) writable by everyone, so that the
// gateway's pseudo-authenticated user may create in it.
func makeOpenDir(ctx context.Context, c *client.Client, dir string) error {
	return c.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
		fi, err := tx.Mkdir(ctx, dir, 0o777)
		if err != nil {
			return fmt.Errorf("%s: %w (remove it, or let the benchmark's previous run finish)", dir, err)
		}
		mode := os.FileMode(0o777)
		_, err = tx.SetAttr(ctx, fi.Ino, client.SetAttr{Mode: &mode})
		return err
	})
}

// createEmptyFiles makes dir with n empty files f00000, f00001..., a
// thousand per transaction.
func createEmptyFiles(ctx context.Context, c *client.Client, dir string, n int) error {
	if err := makeOpenDir(ctx, c, dir); err != nil {
		return err
	}
	for start := 0; start < n; start += 1000 {
		err := c.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
			for i := start; i < min(n, start+1000); i++ {
				if _, err := tx.Create(ctx, fmt.Sprintf("%s/f%05d", dir, i), client.CreateOptions{Mode: 0o644}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("create %d files in %s: %w", n, dir, err)
		}
	}
	return nil
}

// removeLocal removes the local file name if it is there.
func removeLocal(name string) error {
	if err := os.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// getToFile gets PlasmaFS file name into the local file dst.
func getToFile(ctx context.Context, c *client.Client, name, dst string) error {
	f, err := os.Create(dst)
	if err != nil {
		return err
	}
	if err := getTo(ctx, c, name, f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// removeBenchTree removes the benchmark's directory: what the gateway's
// user made with recursive DELETEs through the gateway, the rest with c.
func removeBenchTree(ctx context.Context, c *client.Client, g *gateway, dir string) {
	for _, p := range []string{dir + "/list", dir + "/create"} {
		if resp, err := g.do(http.MethodDelete, g.url(p, "DELETE", "recursive", "true"), nil, 0, http.StatusOK); err == nil {
			resp.Body.Close()
		}
	}
	c.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
		for _, name := range []string{dir + "/put", dir + "/small"} {
			if err := tx.Unlink(ctx, name); err != nil && !isNotFound(err) {
				return err
			}
		}
		return tx.Rmdir(ctx, dir)
	})
}
