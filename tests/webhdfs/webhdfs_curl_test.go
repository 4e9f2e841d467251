package webhdfs

import (
	"bytes"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestWebHDFSCurlRedirect drives CREATE, APPEND and OPEN with curl, as
// WebHDFS's documentation does: the first CREATE (no data) answers 307
// with a Location on the same gateway carrying data=true, the PUT of the
// data there answers 201 and the file is what was sent (plasma cat agrees);
// APPEND (POST) the same with 200; `curl -L -T` does both steps itself;
// OPEN with offset and length serves exactly that range, across blocks.
func TestWebHDFSCurlRedirect(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	c.MustRun("chmod", "777", "/") // admin is no superuser through pseudo authentication
	g := startWebHDFS(t, c)
	dir := t.TempDir()
	data := testkit.SeededBytes(300<<10+123, 26) // several 64 KiB blocks and a partial one
	local := filepath.Join(dir, "data")
	testkit.MustOK(t, "write", os.WriteFile(local, data, 0o644))

	// Step one: no data, a redirect to this gateway with data=true.
	create := g.url("/new/dir/file", "CREATE", "user.name", "admin", "overwrite", "false")
	got := curl(t, "-X", "PUT", "-o", "/dev/null", "-w", "%{http_code} %{redirect_url}", create)
	code, loc, _ := strings.Cut(got, " ")
	if code != "307" {
		t.Fatalf("CREATE without data: status %s, want 307 (%s)", code, got)
	}
	lu, err := url.Parse(loc)
	testkit.MustOK(t, "Location "+loc, err)
	if !strings.HasPrefix(loc, g.URL+"/webhdfs/v1/new/dir/file?") || lu.Query().Get("data") != "true" || lu.Query().Get("user.name") != "admin" {
		t.Fatalf("CREATE redirects to %q, want this gateway's URL of the file with data=true and the same user.name", loc)
	}
	if out, code := c.Run(nil, "stat", "/new/dir/file"); code == 0 {
		t.Fatalf("the first CREATE request (no data) already made the file:\n%s", out)
	}
	// Step two: the data.
	if got := curl(t, "-X", "PUT", "-T", local, "-o", "/dev/null", "-w", "%{http_code}", loc); got != "201" {
		t.Fatalf("PUT of the data to the Location: status %s, want 201", got)
	}
	if out := c.MustRun("cat", "/new/dir/file"); out != string(data) {
		t.Fatalf("plasma cat of the file created through curl: %d bytes, want the %d sent", len(out), len(data))
	}
	if got := testkit.PlasmaOwner(t, c, "/new/dir"); got != "admin:admin" {
		t.Errorf("a parent directory CREATE made belongs to %s, want admin:admin", got)
	}

	// OPEN: whole and ranges (curl -L follows a redirect, were there one).
	if got := curl(t, "-L", g.url("/new/dir/file", "OPEN", "user.name", "admin")); got != string(data) {
		t.Fatalf("OPEN: %d bytes, want %d", len(got), len(data))
	}
	for _, r := range [][2]int{{0, 1}, {65535, 2}, {65536, 65536}, {100000, 200000}, {len(data) - 10, 1000}, {len(data), 5}} {
		got := curl(t, "-L", g.url("/new/dir/file", "OPEN", "user.name", "admin", "offset", strconv.Itoa(r[0]), "length", strconv.Itoa(r[1])))
		want := data[r[0]:min(r[0]+r[1], len(data))]
		if !bytes.Equal([]byte(got), want) {
			t.Errorf("OPEN offset %d length %d: %d bytes, not the %d of the file there", r[0], r[1], len(got), len(want))
		}
	}
	if got := curl(t, g.url("/new/dir/file", "OPEN", "user.name", "admin", "offset", strconv.Itoa(len(data)-7))); got != string(data[len(data)-7:]) {
		t.Errorf("OPEN offset without length: %q, want the last 7 bytes", got)
	}

	// APPEND: POST, 307, POST of the data, 200.
	more := []byte("appended through curl\n")
	testkit.MustOK(t, "write", os.WriteFile(local, more, 0o644))
	got = curl(t, "-X", "POST", "-o", "/dev/null", "-w", "%{http_code} %{redirect_url}", g.url("/new/dir/file", "APPEND", "user.name", "admin"))
	code, loc, _ = strings.Cut(got, " ")
	if code != "307" || !strings.Contains(loc, "data=true") {
		t.Fatalf("APPEND without data: %s, want 307 to a URL with data=true", got)
	}
	if got := curl(t, "-X", "POST", "-T", local, "-o", "/dev/null", "-w", "%{http_code}", loc); got != "200" {
		t.Fatalf("POST of the appended data: status %s, want 200", got)
	}
	if out := c.MustRun("cat", "/new/dir/file"); out != string(data)+string(more) {
		t.Fatalf("after APPEND the file has %d bytes, want %d (the old data and the appended)", len(out), len(data)+len(more))
	}

	// Both steps in one curl: -L re-sends the body to the Location.
	testkit.MustOK(t, "write", os.WriteFile(local, []byte("one curl\n"), 0o644))
	if got := curl(t, "-L", "-X", "PUT", "-T", local, "-o", "/dev/null", "-w", "%{http_code}", g.url("/one", "CREATE", "user.name", "admin")); got != "201" {
		t.Fatalf("curl -L -T CREATE: status %s, want 201", got)
	}
	if out := c.MustRun("cat", "/one"); out != "one curl\n" {
		t.Fatalf("file made by curl -L: %q", out)
	}
	// Without overwrite an existing file is refused at the first step.
	r := webhdfsDo(t, "PUT", g.url("/one", "CREATE", "user.name", "admin"), nil)
	wantException(t, "CREATE of an existing file without overwrite", r, 403, "FileAlreadyExistsException")
	testkit.MustOK(t, "write", os.WriteFile(local, []byte("replaced\n"), 0o644))
	if got := curl(t, "-L", "-X", "PUT", "-T", local, "-o", "/dev/null", "-w", "%{http_code}", g.url("/one", "CREATE", "user.name", "admin", "overwrite", "true")); got != "201" {
		t.Fatalf("CREATE overwrite=true: status %s, want 201", got)
	}
	if out := c.MustRun("cat", "/one"); out != "replaced\n" {
		t.Fatalf("overwritten file: %q", out)
	}
}
