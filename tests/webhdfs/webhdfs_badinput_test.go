package webhdfs

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestWebHDFSBadInput: malformed requests get Hadoop's RemoteException
// with the exception and status Hadoop gives them (unknown operation,
// operation PlasmaFS lacks, ".." in a path, wrong method, a bad number,
// an offset past the end, a missing file, a URL outside /webhdfs/v1, a
// malformed query), and the gateway keeps serving.
func TestWebHDFSBadInput(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	testkit.PutOwned(t, c, "/f", "0123456789", "alice:alice", "644")
	g := startWebHDFS(t, c)
	u := func(p, op string, kv ...string) string {
		return g.url(p, op, append([]string{"user.name", "alice"}, kv...)...)
	}
	for _, tc := range []struct {
		what, method, url string
		status            int
		exc               string
	}{
		{"unknown op", "GET", u("/f", "FROBNICATE"), 400, "IllegalArgumentException"},
		{"no op", "GET", g.URL + "/webhdfs/v1/f?user.name=alice", 400, "IllegalArgumentException"},
		{"op PlasmaFS lacks", "GET", u("/f", "GETACLSTATUS"), 400, "UnsupportedOperationException"},
		{"op PlasmaFS lacks (PUT)", "POST", u("/f", "CONCAT", "sources", "/g"), 400, "UnsupportedOperationException"},
		{"dot-dot in the path", "GET", g.URL + "/webhdfs/v1/a/../f?op=GETFILESTATUS&user.name=alice", 400, "IllegalArgumentException"},
		{"wrong method", "GET", u("/f", "MKDIRS"), 400, "IllegalArgumentException"},
		{"offset not a number", "GET", u("/f", "OPEN", "offset", "ten"), 400, "IllegalArgumentException"},
		{"negative length", "GET", u("/f", "OPEN", "length", "-5"), 400, "IllegalArgumentException"},
		{"offset past the end", "GET", u("/f", "OPEN", "offset", "11"), 403, "EOFException"},
		{"missing file", "GET", u("/nothing", "OPEN"), 404, "FileNotFoundException"},
		{"missing parent", "GET", u("/no/such", "GETFILESTATUS"), 404, "FileNotFoundException"},
		{"open a directory", "GET", u("/", "OPEN"), 404, "FileNotFoundException"},
		{"file as a parent", "GET", u("/f/x", "GETFILESTATUS"), 403, "ParentNotDirectoryException"},
		{"bad boolean", "DELETE", u("/f", "DELETE", "recursive", "maybe"), 400, "IllegalArgumentException"},
		{"bad permission", "PUT", u("/f", "SETPERMISSION", "permission", "999"), 400, "IllegalArgumentException"},
		{"rename without destination", "PUT", u("/f", "RENAME"), 400, "IllegalArgumentException"},
		{"replication out of range", "PUT", u("/f", "SETREPLICATION", "replication", "99"), 400, "IllegalArgumentException"},
		{"outside /webhdfs/v1", "GET", g.URL + "/webhdfs/v2/f?op=OPEN&user.name=alice", 404, "FileNotFoundException"},
		{"malformed query", "GET", g.URL + "/webhdfs/v1/f?op=OPEN&user.name=alice&offset=%zz", 400, "IllegalArgumentException"},
		{"name too long", "PUT", u("/"+strings.Repeat("n", 300), "MKDIRS"), 400, "IllegalArgumentException"},
	} {
		wantException(t, tc.what, webhdfsDo(t, tc.method, tc.url, nil), tc.status, tc.exc)
	}
	if r := webhdfsDo(t, "GET", u("/f", "OPEN", "offset", "10"), nil); r.Status != 200 || len(r.Body) != 0 {
		t.Errorf("OPEN at the end of the file: %d %q, want 200 and nothing", r.Status, r.Body)
	}
	if r := webhdfsDo(t, "GET", u("/f", "OPEN", "offset", "3", "length", "4"), nil); r.Status != 200 || string(r.Body) != "3456" {
		t.Errorf("OPEN offset 3 length 4 after the bad requests: %d %q", r.Status, r.Body)
	}
	if !g.running() {
		t.Fatal("the gateway exited")
	}
}

// TestWebHDFSUploadAborts: an upload that does not complete leaves
// nothing: a client that disconnects mid-body (CREATE: no file; APPEND:
// the file as it was), one that stalls past -idle-timeout (answered with
// an IOException), a body over -max-upload (413). The path is free again
// afterwards (the aborted transaction holds nothing) and the gateway
// keeps serving.
func TestWebHDFSUploadAborts(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	c.MustRun("chmod", "777", "/")
	testkit.PutOwned(t, c, "/log", "first line\n", "alice:alice", "644")
	g := startWebHDFS(t, c, "-idle-timeout", "1s", "-max-upload", "256K")
	u := func(p, op string, kv ...string) string {
		return g.url(p, op, append([]string{"user.name", "alice"}, kv...)...)
	}

	// Disconnects: half of a 200 KiB body, then the connection closes.
	body := testkit.SeededBytes(200<<10, 5)
	partialUpload(t, "PUT", u("/half", "CREATE", "data", "true"), body, len(body)/2)
	partialUpload(t, "POST", u("/log", "APPEND", "data", "true"), body, len(body)/2)
	// The gateway notices the disconnect on its own time: what is checked
	// is that nothing ever shows, and that the name becomes free.
	deadline := time.Now().Add(60 * time.Second)
	for {
		r := webhdfsDo(t, "PUT", u("/half", "CREATE", "data", "true"), strings.NewReader("whole\n"))
		if r.Status == 201 {
			break
		}
		if r.exception() != "IOException" && r.exception() != "FileAlreadyExistsException" || time.Now().After(deadline) {
			t.Fatalf("CREATE of the name an interrupted upload had: %d %s", r.Status, r.Body)
		}
		if r.exception() == "FileAlreadyExistsException" {
			t.Fatalf("an interrupted CREATE left a file: %s", c.MustRun("stat", "/half"))
		}
		time.Sleep(20 * time.Millisecond) // polling a condition, not timing the test
	}
	if got := c.MustRun("cat", "/half"); got != "whole\n" {
		t.Errorf("/half after the interrupted upload and a whole one: %q", got)
	}
	if got := c.MustRun("cat", "/log"); got != "first line\n" {
		t.Errorf("an interrupted APPEND changed the file: %d bytes", len(got))
	}

	// A client that stops sending mid-body but waits for the answer: the
	// answer comes once the gateway has aborted the upload.
	for _, up := range []struct{ method, url, what string }{
		{"PUT", u("/cut", "CREATE", "data", "true"), "CREATE"},
		{"POST", u("/log", "APPEND", "data", "true"), "APPEND"},
	} {
		conn := openUpload(t, up.method, up.url, len(body))
		if _, err := conn.Write(body[:len(body)/3]); err != nil {
			t.Fatal(err)
		}
		testkit.MustOK(t, "half-close", conn.(*net.TCPConn).CloseWrite())
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		testkit.MustOK(t, "the answer to a cut "+up.what, err)
		b, _ := io.ReadAll(resp.Body)
		conn.Close()
		wantException(t, "a cut "+up.what, webhdfsReply{Status: resp.StatusCode, Body: b}, 403, "IOException")
	}
	if plasmaExists(t, c, "/cut") {
		t.Error("a cut CREATE left a file")
	}
	if got := c.MustRun("cat", "/log"); got != "first line\n" {
		t.Errorf("a cut APPEND changed the file: %d bytes", len(got))
	}

	// A stall: the gateway gives up after the idle timeout and says so.
	conn := openUpload(t, "PUT", u("/stalled", "CREATE", "data", "true"), len(body))
	if _, err := conn.Write(body[:1000]); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	testkit.MustOK(t, "the answer to a stalled upload", err)
	b, _ := io.ReadAll(resp.Body)
	conn.Close()
	wantException(t, "stalled upload", webhdfsReply{Status: resp.StatusCode, Body: b}, 403, "IOException")
	if plasmaExists(t, c, "/stalled") {
		t.Error("a stalled upload left a file")
	}

	// Over the limit.
	big := testkit.SeededBytes(300<<10, 6)
	r := webhdfsDo(t, "PUT", u("/big", "CREATE", "data", "true"), strings.NewReader(string(big)))
	wantException(t, "upload over -max-upload", r, 413, "IOException")
	if plasmaExists(t, c, "/big") {
		t.Error("an upload over the limit left a file")
	}
	if !g.running() {
		t.Fatal("the gateway exited")
	}
	if r := webhdfsDo(t, "GET", u("/log", "OPEN"), nil); r.Status != 200 || string(r.Body) != "first line\n" {
		t.Errorf("OPEN after the aborted uploads: %d %q", r.Status, r.Body)
	}
}

// openUpload sends the request line and headers of an upload of n bytes
// and returns the connection, for the body to follow (or not).
func openUpload(t *testing.T, method, rawURL string, n int) net.Conn {
	t.Helper()
	pu, err := url.Parse(rawURL)
	testkit.MustOK(t, "url", err)
	conn, err := net.Dial("tcp", pu.Host)
	testkit.MustOK(t, "dial", err)
	conn.SetDeadline(time.Now().Add(2 * time.Minute)) // a hung gateway fails the test, not the run
	fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/octet-stream\r\nContent-Length: %d\r\n\r\n", method, pu.RequestURI(), pu.Host, n)
	return conn
}

// partialUpload sends the first sent bytes of body and disconnects.
func partialUpload(t *testing.T, method, rawURL string, body []byte, sent int) {
	t.Helper()
	conn := openUpload(t, method, rawURL, len(body))
	if _, err := conn.Write(body[:sent]); err != nil {
		t.Fatal(err)
	}
	conn.Close()
}
