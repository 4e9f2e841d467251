package kv_test

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/plasmafs/plasma/kv"
)

// testServer is a Server running Serve on a loopback port.
type testServer struct{ URL, Addr string }

func serve(t *testing.T, srv *kv.Server) testServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return testServer{URL: "http://" + ln.Addr().String(), Addr: ln.Addr().String()}
}

// TestServeRawConnection speaks HTTP/1.1 by hand on one connection:
// pipelined GETs and HEADs answered in order on the fast path, then a
// request the fast path leaves to net/http (a query string), sent in the
// same packet as the requests before it, and requests after it on the
// same connection; Connection: close ends a fast connection.
func TestServeRawConnection(t *testing.T) {
	ctx := context.Background()
	_, db := newDB(t, kv.CreateOptions{}, kv.Options{})
	big := bytes.Repeat([]byte("0123456789"), 3000)
	w, _ := db.Begin(ctx)
	w.Put([]byte("a"), []byte("alpha"))
	w.Put([]byte("big"), big)
	w.Put([]byte("sp ace"), []byte("percent"))
	if err := w.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	srv := kv.NewServer(db, kv.ServerOptions{})
	defer srv.Close()
	ts := serve(t, srv)

	c, err := net.Dial("tcp", ts.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Minute)) // a broken server fails the test, not hangs it
	br := bufio.NewReader(c)
	read := func(method, want string, status int) {
		t.Helper()
		resp, err := http.ReadResponse(br, &http.Request{Method: method})
		if err != nil {
			t.Fatalf("%s: %v", want, err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != status || string(b) != want {
			t.Fatalf("got %d %q (%v), want %d %q", resp.StatusCode, b, err, status, want)
		}
		if status == 200 && resp.Header.Get("X-KV-Version") != "2" {
			t.Fatalf("version header %q", resp.Header.Get("X-KV-Version"))
		}
	}
	req := "GET /a HTTP/1.1\r\nHost: x\r\n\r\n" +
		"HEAD /big HTTP/1.1\r\nHost: x\r\n\r\n" +
		"GET /big HTTP/1.1\r\nhost: x\r\nContent-Length: 0\r\n\r\n" +
		"GET /sp%20ace HTTP/1.1\r\nHost: x\r\n\r\n" +
		"GET /nothing HTTP/1.1\r\nHost: x\r\n\r\n" +
		"GET /a?x=1 HTTP/1.1\r\nHost: x\r\n\r\n" + // net/http from here on
		"GET /big HTTP/1.1\r\nHost: x\r\n\r\n"
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	read("GET", "alpha", 200)
	read("HEAD", "", 200)
	read("GET", string(big), 200)
	read("GET", "percent", 200)
	read("GET", "not found\n", 404)
	read("GET", "alpha", 200)
	read("GET", string(big), 200)

	// A request without Host is refused (by net/http, 400); a fast one
	// with Connection: close is answered, then the server closes.
	for _, tc := range []struct {
		req    string
		status int
	}{
		{"GET /a HTTP/1.1\r\n\r\n", 400},
		{"GET /a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 200},
	} {
		c, err := net.Dial("tcp", ts.Addr)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(c, tc.req)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != tc.status {
			t.Fatalf("%q: %v %v", tc.req, resp, err)
		}
		rest, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("%q: %v", tc.req, err)
		}
		if tc.status == 200 {
			// After the body, the server must close: a read sees EOF.
			if string(rest) != "alpha" {
				t.Fatalf("%q: body %q", tc.req, rest)
			}
			// (The deadline only keeps a broken server from hanging the test.)
			c.SetReadDeadline(time.Now().Add(time.Minute))
			if n, err := c.Read(make([]byte, 1)); n != 0 || err != io.EOF {
				t.Fatalf("%q: connection still open (%d, %v)", tc.req, n, err)
			}
		}
		c.Close()
	}
}
