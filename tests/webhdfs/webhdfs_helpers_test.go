package webhdfs

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/plasmafs/plasma/internal/clustertest"
)

// webhdfsGateway is a running `plasma webhdfs`.
type webhdfsGateway struct {
	URL  string // scheme://host:port (without /webhdfs/v1)
	cmd  *exec.Cmd
	done chan struct{}
}

// startWebHDFS starts `plasma webhdfs -listen 127.0.0.1:0 args...` with the
// cluster's superuser credential and waits until it serves.
func startWebHDFS(t *testing.T, c *clustertest.Procs, args ...string) *webhdfsGateway {
	t.Helper()
	g := &webhdfsGateway{done: make(chan struct{})}
	g.cmd = exec.Command(c.Bin, append([]string{"webhdfs", "-listen", "127.0.0.1:0"}, args...)...)
	g.cmd.Env = c.Env()
	g.cmd.Stderr = os.Stderr
	out, err := g.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := g.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		g.cmd.Process.Signal(syscall.SIGTERM)
		<-g.done
	})
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if l, ok := strings.CutPrefix(sc.Text(), "plasma: serving WebHDFS on "); ok {
			g.URL = strings.TrimSuffix(l, "/webhdfs/v1/")
			break
		}
	}
	go func() {
		for sc.Scan() {
		}
		g.cmd.Wait()
		close(g.done)
	}()
	if g.URL == "" {
		<-g.done
		t.Fatalf("plasma webhdfs did not start (exit %d)", g.cmd.ProcessState.ExitCode())
	}
	return g
}

// running reports whether the gateway process is still up.
func (g *webhdfsGateway) running() bool {
	select {
	case <-g.done:
		return false
	default:
		return true
	}
}

// url is the WebHDFS URL of path with op and the parameters kv (name,
// value, name, value...).
func (g *webhdfsGateway) url(path, op string, kv ...string) string {
	q := url.Values{"op": {op}}
	for i := 0; i+1 < len(kv); i += 2 {
		q.Set(kv[i], kv[i+1])
	}
	return g.URL + "/webhdfs/v1" + (&url.URL{Path: path}).EscapedPath() + "?" + q.Encode()
}

// webhdfsReply is an answer of the gateway.
type webhdfsReply struct {
	Status   int
	Body     []byte
	Location string
}

// exception is the RemoteException's exception name ("" if the body is
// not one).
func (r webhdfsReply) exception() string {
	var e struct {
		RemoteException struct{ Exception, JavaClassName, Message string }
	}
	if json.Unmarshal(r.Body, &e) != nil {
		return ""
	}
	return e.RemoteException.Exception
}

func (r webhdfsReply) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("answer %q: %v", r.Body, err)
	}
}

// do sends one request (redirects not followed).
func webhdfsDo(t *testing.T, method, u string, body io.Reader) webhdfsReply {
	t.Helper()
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		t.Fatal(err)
	}
	cl := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the answer: %v", method, u, err)
	}
	return webhdfsReply{Status: resp.StatusCode, Body: b, Location: resp.Header.Get("Location")}
}

// wantException checks that r is the RemoteException exc with status.
func wantException(t *testing.T, what string, r webhdfsReply, status int, exc string) {
	t.Helper()
	if r.Status != status || r.exception() != exc {
		t.Errorf("%s: status %d %s, want %d %s (body %s)", what, r.Status, r.exception(), status, exc, r.Body)
	}
}

// curl runs curl with args and returns its output (stdout).
func curl(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("curl", append([]string{"-sS"}, args...)...).Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("curl %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr)
	}
	return string(out)
}
