package cli

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/plasmafs/plasma/internal/auth"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// adminTop is 'plasma admin top': the namenode's operations per second,
// their latencies, commits and the cluster's gauges, from its /metrics,
// redrawn every interval like top.
func adminTop(ctx context.Context, args []string) error {
	f := newFlags("admin top", "[-admin ADDR] [-interval D] [-n COUNT]", `A live view of the namenode from its /metrics (its -admin-listen port): operations per
second and their mean latency, busiest first, commits (rate, latency, batches, fsyncs), open
transactions, locks, conflicts and datanodes. Redraws every -interval until Ctrl-C (or -n times).`, false)
	dir := f.String("dir", defaultClusterDir(), "cluster directory whose recorded namenode admin address to use (when -admin is not given)")
	addr := f.String("admin", "", "the namenode's admin `address` (host:port)")
	credFile := f.String("credential", "", "a credential `file` of the cluster, to connect over TLS (needed from another host)")
	interval := f.durationRange("interval", 2*time.Second, 10*time.Millisecond, time.Hour, "time between updates")
	count := f.intRange("n", 0, 0, 1<<30, "updates to show before exiting (0: until interrupted)")
	if err := f.parse(args); err != nil {
		return err
	}
	if len(f.pos) != 0 {
		return usagef("unexpected argument %q", f.pos[0])
	}
	if *addr == "" {
		s, found, err := loadClusterSettings(*dir)
		if err != nil {
			return err
		}
		if *addr = s.AdminAddrs["namenode"]; !found || *addr == "" {
			return usagef("no namenode admin address recorded in %s: give -admin HOST:PORT (the namenode's -admin-listen)", filepath.Join(*dir, clusterSettingsFile))
		}
	}
	sc, err := newScraper(*addr, *credFile)
	if err != nil {
		return err
	}
	prev, err := sc.scrape(ctx)
	if err != nil {
		return err
	}
	for i := 0; *count == 0 || i < *count; i++ {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(*interval):
		}
		cur, err := sc.scrape(ctx)
		if err != nil {
			return err
		}
		if f, ok := stdout.(*os.File); ok && isTerminal(f) {
			fmt.Fprint(stdout, "\x1b[H\x1b[2J")
		}
		renderTop(stdout, *addr, prev, cur)
		prev = cur
	}
	return nil
}

// scraper reads a daemon's /metrics.
type scraper struct {
	url string
	hc  *http.Client
}

func newScraper(addr, credFile string) (*scraper, error) {
	sc := &scraper{url: "http://" + addr + "/metrics", hc: &http.Client{Timeout: 10 * time.Second}}
	if credFile != "" {
		cred, err := auth.LoadCredential(credFile)
		if err != nil {
			return nil, err
		}
		sc.url = "https://" + addr + "/metrics"
		sc.hc.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: cred.CA, ServerName: "plasma", Certificates: []tls.Certificate{cred.Cert}}}
	}
	return sc, nil
}

// sample is one scrape, and when it was taken.
type sample struct {
	at  time.Time
	mfs map[string]*dto.MetricFamily
}

func (sc *scraper) scrape(ctx context.Context) (sample, error) {
	q, _ := http.NewRequestWithContext(ctx, http.MethodGet, sc.url, nil)
	resp, err := sc.hc.Do(q)
	if err != nil {
		return sample{}, fmt.Errorf("namenode metrics at %s: %w (is the namenode running with -admin-listen there?)", sc.url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return sample{}, fmt.Errorf("namenode metrics %s: %s: %s", sc.url, resp.Status, strings.TrimSpace(string(b)))
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return sample{}, fmt.Errorf("namenode metrics %s: %w", sc.url, err)
	}
	return sample{at: time.Now(), mfs: mfs}, nil
}

// value sums family name's series that have label=want ("" label: all):
// counter and gauge values, histogram counts (sum: their sums).
func (s sample) value(name, label, want string, sum bool) float64 {
	var v float64
	for _, m := range s.mfs[name].GetMetric() {
		if label != "" && labelOf(m, label) != want {
			continue
		}
		switch {
		case m.Histogram != nil && sum:
			v += m.GetHistogram().GetSampleSum()
		case m.Histogram != nil:
			v += float64(m.GetHistogram().GetSampleCount())
		case m.Counter != nil:
			v += m.GetCounter().GetValue()
		case m.Gauge != nil:
			v += m.GetGauge().GetValue()
		}
	}
	return v
}

func labelOf(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// rate is the per-second change of a counter between two samples;
// meanMs the mean of a histogram's observations between them, in ms.
func rate(a, b sample, name, label, want string) float64 {
	return (b.value(name, label, want, false) - a.value(name, label, want, false)) / b.at.Sub(a.at).Seconds()
}

func meanMs(a, b sample, name, label, want string) float64 {
	n := b.value(name, label, want, false) - a.value(name, label, want, false)
	if n <= 0 {
		return 0
	}
	return (b.value(name, label, want, true) - a.value(name, label, want, true)) / n * 1000
}

func renderTop(w io.Writer, addr string, a, b sample) {
	const nn = "plasma_namenode_"
	fmt.Fprintf(w, "plasma admin top: namenode %s at %s, over %.1fs\n\n", addr, b.at.Format("15:04:05"), b.at.Sub(a.at).Seconds())
	fmt.Fprintf(w, "commits    %8.1f/s  (durable %.1f/s, async %.1f/s)  mean %.2f ms  batches %.1f/s\n",
		rate(a, b, nn+"commits_total", "", ""), rate(a, b, nn+"commits_by_mode_total", "mode", "durable"), rate(a, b, nn+"commits_by_mode_total", "mode", "async"),
		meanMs(a, b, nn+"commit_duration_seconds", "", ""), rate(a, b, nn+"commit_batches_total", "", ""))
	fmt.Fprintf(w, "fsyncs     %8.1f/s  mean %.2f ms\n", rate(a, b, nn+"fsync_duration_seconds", "", ""), meanMs(a, b, nn+"fsync_duration_seconds", "", ""))
	fmt.Fprintf(w, "open transactions %.0f  locks %.0f  leases %.0f  conflicts %.1f/s  errors %.1f/s\n",
		b.value(nn+"open_transactions", "", "", false), b.value(nn+"locks_held", "", "", false), b.value(nn+"directory_leases", "", "", false),
		rate(a, b, nn+"conflicts_total", "", ""), rate(a, b, nn+"request_errors_total", "", ""))
	fmt.Fprintf(w, "datanodes %.0f live, %.0f dead; blocks %.0f used, %.0f free\n\n",
		b.value(nn+"datanodes", "state", "live", false), b.value(nn+"datanodes", "state", "dead", false),
		b.value(nn+"blocks", "state", "used", false), b.value(nn+"blocks", "state", "free", false))
	type opRow struct {
		op        string
		perSec, m float64
	}
	var rows []opRow
	for _, m := range b.mfs[nn+"requests_total"].GetMetric() {
		op := labelOf(m, "op")
		rows = append(rows, opRow{op, rate(a, b, nn+"requests_total", "op", op), meanMs(a, b, nn+"request_duration_seconds", "op", op)})
	}
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].perSec != rows[j].perSec {
			return rows[i].perSec > rows[j].perSec
		}
		return rows[i].op < rows[j].op
	})
	fmt.Fprintf(w, "%-14s %10s %10s\n", "OPERATION", "PER SEC", "MEAN MS")
	for _, r := range rows {
		if r.perSec == 0 {
			continue
		}
		mean := "-" // commits and sync are answered later: see commits above
		if r.m > 0 {
			mean = fmt.Sprintf("%.3f", r.m)
		}
		fmt.Fprintf(w, "%-14s %10.1f %10s\n", r.op, r.perSec, mean)
	}
}
