package mr

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// TestMRWebView: 'plasma mr web' lists a finished job and shows its
// status, report and JSON form, escapes what users named, and answers 404
// for a job that does not exist.
func TestMRWebView(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	testkit.MRPut(t, c, "/in", map[string][]byte{"a": []byte("x y x\n")})
	out, code := mrRun(t, c, "-input", "/in", "-output", "/out", "-work", "/work", "-log", "/log",
		"-name", "<script>alert(1)</script>", "-map", `tr ' ' '\n' | awk 'NF {print $1 "\t1"}'`, "-partitions", "1")
	if code != 0 {
		t.Fatalf("mr run: exit %d:\n%s", code, out)
	}
	id := testkit.ReportValue(t, out, "Job ID")

	cmd := exec.Command(c.Bin, "mr", "web", "-listen", "127.0.0.1:0", "-log", "/log")
	cmd.Env = c.Env()
	stdout, err := cmd.StdoutPipe()
	testkit.MustOK(t, "pipe", err)
	testkit.MustOK(t, "start mr web", cmd.Start())
	defer func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() }()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	testkit.MustOK(t, "mr web address", err)
	base := strings.TrimSpace(line)

	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(base + path)
		testkit.MustOK(t, "GET "+path, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, body := get("")
	if code != 200 || !strings.Contains(body, id) || !strings.Contains(body, "successful") {
		t.Fatalf("job list (%d) does not show job %s as successful:\n%s", code, id, body)
	}
	if strings.Contains(body, "<script>alert") {
		t.Fatalf("the job name reached the page unescaped:\n%s", body)
	}
	code, body = get("job/" + id)
	if code != 200 || !strings.Contains(body, "Map tasks") || !strings.Contains(body, "&lt;script&gt;") {
		t.Fatalf("job page (%d) lacks the report or the escaped name:\n%s", code, body)
	}
	code, body = get("job/" + id + ".json")
	var js struct {
		JobID, State string
		MapsDone     int
		Report       string `json:"report"`
	}
	if code != 200 || json.Unmarshal([]byte(body), &js) != nil || js.JobID != id || js.State != "successful" || js.MapsDone != 1 || !strings.Contains(js.Report, "Map tasks") {
		t.Fatalf("job JSON (%d): %s", code, body)
	}
	if code, _ := get("job/nosuchjob"); code != http.StatusNotFound {
		t.Fatalf("a job that does not exist: %d, want 404", code)
	}
}
