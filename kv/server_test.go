package kv_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/plasmafs/plasma/kv"
)

func httpDo(t *testing.T, c *http.Client, method, url string, body io.Reader) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: body: %v", method, url, err)
	}
	return resp.StatusCode, resp.Header, b
}

// TestServeReads: GET returns values (inline, cached, streamed past the
// cache) and 404 for absent keys, HEAD the length; binary keys through
// percent-encoding; the snapshot moves only on refresh.
func TestServeReads(t *testing.T) {
	ctx := context.Background()
	_, db := newDB(t, kv.CreateOptions{}, kv.Options{})
	big := bytes.Repeat([]byte("0123456789abcdef"), 300000/16*3) // past the cached-value limit
	vals := map[string][]byte{"small": []byte("tiny"), "thirtyk": bytes.Repeat([]byte("v"), 30000), "big": big,
		"a/b c?d#e%f": []byte("odd key"), string([]byte{0, 1, 0xff, '/'}): []byte("binary key"), "empty": {}}
	w, _ := db.Begin(ctx)
	for k, v := range vals {
		w.Put([]byte(k), v)
	}
	if err := w.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	srv := kv.NewServer(db, kv.ServerOptions{})
	defer srv.Close()
	ts := serve(t, srv)
	hc := &http.Client{Transport: &http.Transport{}}
	defer hc.CloseIdleConnections()
	// Keep-alive: after the first request, every one reuses the connection.
	var fresh atomic.Int64
	trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) {
		if !i.Reused {
			fresh.Add(1)
		}
	}}
	hc.Transport = traceTransport{hc.Transport, trace}
	for k, v := range vals {
		code, h, body := httpDo(t, hc, "GET", ts.URL+kv.URLPath([]byte(k)), nil)
		if code != 200 || !bytes.Equal(body, v) || h.Get("X-KV-Version") != "2" {
			t.Fatalf("GET %q: %d, %d bytes, version %s", k, code, len(body), h.Get("X-KV-Version"))
		}
		code, h, body = httpDo(t, hc, "HEAD", ts.URL+kv.URLPath([]byte(k)), nil)
		if code != 200 || len(body) != 0 || h.Get("Content-Length") != strconv.Itoa(len(v)) {
			t.Fatalf("HEAD %q: %d, length %s", k, code, h.Get("Content-Length"))
		}
	}
	if n := fresh.Load(); n != 1 {
		t.Fatalf("%d connections for sequential requests", n)
	}
	if code, _, _ := httpDo(t, hc, "GET", ts.URL+"/absent", nil); code != 404 {
		t.Fatalf("absent key: %d", code)
	}
	if code, _, _ := httpDo(t, hc, "HEAD", ts.URL+"/absent", nil); code != 404 {
		t.Fatalf("HEAD absent key: %d", code)
	}
	if code, _, _ := httpDo(t, hc, "PUT", ts.URL+"/x", strings.NewReader("y")); code != 405 {
		t.Fatalf("PUT on a read-only server: %d", code)
	}
	// Another writer commits; the server sees it after a refresh.
	w, _ = db.Begin(ctx)
	w.Put([]byte("later"), []byte("committed later"))
	w.Commit(ctx) // this refreshes db itself; use a second DB to see the server's view unchanged
	rdb, err := kv.Open(ctx, db.Client(), "/db", kv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	rsrv := kv.NewServer(rdb, kv.ServerOptions{})
	defer rsrv.Close()
	rts := httptest.NewServer(rsrv)
	defer rts.Close()
	w, _ = db.Begin(ctx)
	w.Put([]byte("latest"), []byte("after the server opened"))
	w.Commit(ctx)
	if code, _, _ := httpDo(t, hc, "GET", rts.URL+"/latest", nil); code != 404 {
		t.Fatalf("before refresh: %d", code)
	}
	if code, _, body := httpDo(t, hc, "POST", rts.URL+"/-/refresh", nil); code != 200 || string(body) != "version 4\n" {
		t.Fatalf("refresh: %d %q", code, body)
	}
	if code, _, body := httpDo(t, hc, "GET", rts.URL+"/latest", nil); code != 200 || string(body) != "after the server opened" {
		t.Fatalf("after refresh: %d %q", code, body)
	}
}

// TestServeConcurrentAgainstModel: many keep-alive clients read and
// write (PUT, DELETE, batched by the server) at once; each client owns
// some keys, so it knows what it must read back; at the end a fresh
// reader finds exactly the model.
func TestServeConcurrentAgainstModel(t *testing.T) {
	ctx := context.Background()
	c, db := newDB(t, kv.CreateOptions{}, kv.Options{})
	srv := kv.NewServer(db, kv.ServerOptions{Writable: true, MaxBufferedBody: 40000})
	defer srv.Close()
	ts := serve(t, srv)
	const clients = 16
	models := make([]model, clients)
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for ci := 0; ci < clients; ci++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Writes on their own connections (Serve hands those to
			// net/http), reads on others (they stay on the fast path).
			hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2}}
			defer hc.CloseIdleConnections()
			rc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2}}
			defer rc.CloseIdleConnections()
			r := rand.New(rand.NewPCG(uint64(ci), 9))
			m := model{}
			models[ci] = m
			do := func(method, key string, body []byte) (int, []byte, error) {
				req, _ := http.NewRequest(method, ts.URL+kv.URLPath([]byte(key)), bytes.NewReader(body))
				if body == nil {
					req.Body = nil
				}
				c := hc
				if method == "GET" {
					c = rc
				}
				resp, err := c.Do(req)
				if err != nil {
					return 0, nil, err
				}
				defer resp.Body.Close()
				b, err := io.ReadAll(resp.Body)
				return resp.StatusCode, b, err
			}
			for op := 0; op < 60; op++ {
				key := fmt.Sprintf("c%02d/k%d", ci, r.IntN(10))
				switch x := r.IntN(10); {
				case x < 4:
					// Inline values (up to 64 bytes, empty ones too), values in
					// one block, values over several: each is served its own way.
					v := randBytes(r, []int{r.IntN(65), r.IntN(4000), r.IntN(50000)}[r.IntN(3)])
					code, _, err := do("PUT", key, v)
					if err != nil || code != 204 {
						errs <- fmt.Errorf("PUT %s: %d %v", key, code, err)
						return
					}
					m[key] = v
				case x < 5:
					code, _, err := do("DELETE", key, nil)
					if err != nil || code != 204 {
						errs <- fmt.Errorf("DELETE %s: %d %v", key, code, err)
						return
					}
					delete(m, key)
				default:
					code, b, err := do("GET", key, nil)
					want, ok := m[key]
					if err != nil || (ok && (code != 200 || !bytes.Equal(b, want))) || (!ok && code != 404) {
						errs <- fmt.Errorf("GET %s: %d (%d bytes, want %d, present %v) %v", key, code, len(b), len(want), ok, err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	all := model{}
	for _, m := range models {
		for k, v := range m {
			all[k] = v
		}
	}
	fresh, err := kv.Open(ctx, c, "/db", kv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	s := fresh.Snapshot()
	defer s.Release()
	verify(t, s, all)
	t.Logf("%d commits for %d clients' writes", s.Version()-1, clients)
}

type traceTransport struct {
	rt    http.RoundTripper
	trace *httptrace.ClientTrace
}

func (t traceTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	return t.rt.RoundTrip(r.WithContext(httptrace.WithClientTrace(r.Context(), t.trace)))
}
