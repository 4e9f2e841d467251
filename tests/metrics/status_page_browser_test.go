package metrics

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/plasmafs/plasma/internal/clustertest"
)

// chromium returns the path of Debian's chromium, installing the package
// when it is missing (as 'make deps' does).
func chromium(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	t.Log("chromium is missing: installing Debian's chromium")
	for _, args := range [][]string{{"update", "-qq"}, {"install", "-y", "-qq", "chromium"}} {
		cmd := exec.Command("apt-get", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("apt-get %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	p, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("chromium still missing after apt-get install: %v", err)
	}
	return p
}

// pageErrors collects a page's script errors and error log entries.
type pageErrors struct {
	mu   sync.Mutex
	msgs []string
}

func (e *pageErrors) watch(ctx context.Context) {
	for m, err := range chromedp.Console(ctx) {
		if err != nil {
			return
		}
		if m.IsException() || m.Type == chromedp.ConsoleError {
			e.mu.Lock()
			e.msgs = append(e.msgs, m.String())
			e.mu.Unlock()
		}
	}
}

func (e *pageErrors) list() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.msgs...)
}

// datanodeRows reads the datanode table of the status page: each row's
// address cell and state cell.
// The cluster's state comes last, as a row ["cluster", its first word].
const datanodeRows = `Array.from(document.querySelectorAll('#datanodes tr.datanode')).map(r => [r.cells[1].innerText, r.cells[2].innerText.trim()])` +
	`.concat([["cluster", document.getElementById('state').innerText.split(':')[0]]])`

// TestStatusPageInBrowser (issue 25): the namenode's status page, loaded
// in headless Chromium at a phone's width, runs without script errors and
// shows both datanodes live; after one datanode is killed, the page
// (reloaded until then) shows it dead and the cluster degraded. With
// PLASMA_STATUS_SCREENSHOT=FILE it also writes a screenshot of the page
// (docs/status-page.png is made so).
func TestStatusPageInBrowser(t *testing.T) {
	bin := chromium(t)
	c := clustertest.Start(t, clustertest.Options{Admin: true, Datanodes: 2})
	c.MustRun("put", "-q", "-rep", "2", localFile(t, 300<<10), "/some-file")
	url := "http://" + c.NN.AdminAddr + "/"

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(bin), chromedp.NoSandbox, chromedp.WindowSize(412, 915))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	bctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	// The first Run starts the browser, without a deadline (it would end
	// the browser); the console is watched from then on.
	if err := chromedp.Do(bctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	var errs pageErrors
	go errs.watch(bctx)

	// rows loads the page afresh and returns its datanode rows.
	rows := func() ([][]string, error) {
		ctx, cancel := context.WithTimeout(bctx, 60*time.Second)
		defer cancel()
		if err := chromedp.Do(ctx, chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS("#datanodes"))); err != nil {
			return nil, err
		}
		return chromedp.Run(ctx, chromedp.Evaluate[[][]string](datanodeRows))
	}
	stateOf := func(rs [][]string, addr string) string {
		for _, r := range rs {
			if strings.Contains(r[0], addr) {
				return r[1]
			}
		}
		return ""
	}
	// Each check loads the page afresh until it holds (or a deadline
	// passes): the page also reloads itself, which may interrupt a read.
	var rs [][]string
	var err error
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(90 * time.Second); ; {
			rs, err = rows()
			if err == nil && ok() {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("status page at %s: after 90 s, rows %q (%v), want %s", url, rs, err, what)
			}
		}
	}
	waitFor("both datanodes live, the cluster healthy", func() bool {
		return len(rs) == 3 && stateOf(rs, c.DNs[0].Addr) == "live" && stateOf(rs, c.DNs[1].Addr) == "live" && stateOf(rs, "cluster") == "healthy"
	})
	if shot := os.Getenv("PLASMA_STATUS_SCREENSHOT"); shot != "" {
		// Some commits until the chart has a few points to draw.
		for i := 0; ; i++ {
			c.MustRun("mkdir", "-p", fmt.Sprintf("/load/%d", i))
			rows() // a failed load is tried again in the next round
			const points = `(document.querySelector('polyline')?.getAttribute('points') ?? '').trim().split(/ +/).length`
			if n, err := chromedp.Run(bctx, chromedp.Evaluate[int](points)); err == nil && n >= 6 {
				break
			}
		}
		png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
		if err != nil || !bytes.HasPrefix(png, []byte("\x89PNG")) {
			t.Fatalf("screenshot: %v", err)
		}
		if err := os.WriteFile(shot, png, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	c.Kill(c.DNs[1])
	waitFor("the killed datanode dead, the other live, the cluster degraded", func() bool {
		return stateOf(rs, c.DNs[1].Addr) == "dead" && stateOf(rs, c.DNs[0].Addr) == "live" && stateOf(rs, "cluster") == "degraded"
	})
	if e := errs.list(); len(e) > 0 {
		t.Errorf("the status page logged errors in the browser: %q", e)
	}
}
