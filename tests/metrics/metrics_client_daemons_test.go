package metrics

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/auth"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/internal/mrexec"
	"github.com/plasmafs/plasma/tests/testkit"
)

// startDaemon runs plasma args against c until the test ends (SIGTERM)
// and returns the first line of its output that starts with ready (the
// daemon prints it once it serves).
func startDaemon(t *testing.T, c *clustertest.Procs, ready string, args ...string) string {
	t.Helper()
	cmd := exec.Command(c.Bin, args...)
	cmd.Env = c.Env()
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		<-done
	})
	sc := bufio.NewScanner(out)
	line := ""
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), ready) {
			line = sc.Text()
			break
		}
	}
	go func() {
		for sc.Scan() {
		}
		cmd.Wait()
		close(done)
	}()
	if line == "" {
		<-done
		t.Fatalf("plasma %s did not start (exit %d)", strings.Join(args, " "), cmd.ProcessState.ExitCode())
	}
	return line
}

// requestsOf scrapes addr and returns plasma_<sub>_requests_total{op}.
func requestsOf(t *testing.T, addr, sub, op string) float64 {
	t.Helper()
	return testkit.MetricSum(t, testkit.Scrape(t, addr), "plasma_"+sub+"_requests_total", map[string]string{"op": op})
}

// TestMetricsOfClientDaemons (issue 25): the FUSE mount, the NFS bridge,
// kv serve and a MapReduce task server serve /metrics on -admin-listen
// that parse with the Prometheus text parser, with the Go runtime's
// metrics and request counters that move with the requests served.
func TestMetricsOfClientDaemons(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})

	t.Run("kv serve", func(t *testing.T) {
		c.MustRun("kv", "create", "-db", "/kvm")
		if out, code := c.Run([]byte("value"), "kv", "insert", "-db", "/kvm", "key"); code != 0 {
			t.Fatal(out)
		}
		admin := clustertest.FreeAddr(t)
		line := startDaemon(t, c, "listening on ", "kv", "serve", "-db", "/kvm", "-listen", "127.0.0.1:0", "-refresh", "0", "-admin-listen", admin)
		base, _, _ := strings.Cut(strings.TrimPrefix(line, "listening on "), " ")
		before := testkit.MetricSumOr0(testkit.Scrape(t, admin), "plasma_kv_requests_total", map[string]string{"op": "GET"})
		for range 3 {
			resp, err := http.Get(base + "/key")
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if string(b) != "value" {
				t.Fatalf("GET /key: %q", b)
			}
		}
		if d := requestsOf(t, admin, "kv", "GET") - before; d != 3 {
			t.Errorf("kv GET requests moved by %v for 3 GETs", d)
		}
		testkit.MetricSum(t, testkit.Scrape(t, admin), "go_goroutines", nil)
	})

	t.Run("nfs", func(t *testing.T) {
		admin := clustertest.FreeAddr(t)
		line := startDaemon(t, c, "plasma: serving NFSv3", "nfs", "-listen", "127.0.0.1:0", "-no-root-squash", "-admin-listen", admin)
		addr := line[strings.LastIndex(line, " ")+1:]
		before := testkit.MetricSumOr0(testkit.Scrape(t, admin), "plasma_nfs_requests_total", map[string]string{"op": "mkdir"})
		tg := testkit.DialNFS(t, addr)
		if _, err := tg.Mkdir("/nfsdir", 0o755); err != nil {
			t.Fatal(err)
		}
		if d := requestsOf(t, admin, "nfs", "mkdir") - before; d != 1 {
			t.Errorf("NFS mkdir calls moved by %v for one mkdir", d)
		}
		if v := requestsOf(t, admin, "nfs", "mnt"); v < 1 {
			t.Errorf("MOUNT calls: %v, want at least the client's mount", v)
		}
	})

	t.Run("mount", func(t *testing.T) {
		testkit.NeedFUSE(t)
		admin := clustertest.FreeAddr(t)
		dir := filepath.Join(t.TempDir(), "mnt")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		startDaemon(t, c, "plasma: mounted ", "mount", dir, "-admin-listen", admin)
		before := testkit.MetricSumOr0(testkit.Scrape(t, admin), "plasma_mount_requests_total", map[string]string{"op": "create"})
		if err := os.WriteFile(filepath.Join(dir, "via-mount"), []byte("hello"), 0o644); err != nil {
			t.Fatal(err)
		}
		if d := requestsOf(t, admin, "mount", "create") - before; d != 1 {
			t.Errorf("FUSE creates moved by %v for one new file", d)
		}
		if v := requestsOf(t, admin, "mount", "write"); v < 1 {
			t.Errorf("FUSE writes: %v, want at least 1", v)
		}
	})

	t.Run("taskserver", func(t *testing.T) {
		admin := clustertest.FreeAddr(t)
		line := startDaemon(t, c, "127.0.0.1:", "mr", "taskserver", "-listen", "127.0.0.1:0", "-datanode", c.DNs[0].Addr, "-slots", "1",
			"-credential", c.IssueCredential("taskserver", auth.RoleTaskServer), "-admin-listen", admin)
		before := testkit.MetricSumOr0(testkit.Scrape(t, admin), "plasma_taskserver_requests_total", map[string]string{"op": "info"})
		cl := c.Client(client.Config{})
		defer cl.Close()
		if _, err := mrexec.Dial(context.Background(), strings.TrimSpace(line), cl, ""); err != nil {
			t.Fatal(err)
		}
		if d := requestsOf(t, admin, "taskserver", "info") - before; d != 1 {
			t.Errorf("task server info requests moved by %v for one Dial", d)
		}
	})
}
