// Package statuspage is the namenode's status page, served on its admin
// port at /: the cluster's state, its datanodes with their capacity and
// liveness (linking to each datanode's own admin page), commit rate and
// latency over the last minutes as a small chart, open transactions and
// the namenode's recent warnings and errors. It is plain server-rendered
// HTML (html/template) with no script, readable on a phone; the page
// reloads itself every few seconds.
package statuspage

import (
	"fmt"
	"html/template"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/plasmafs/plasma/internal/metrics"
	"github.com/plasmafs/plasma/internal/namenode"
	"github.com/prometheus/client_golang/prometheus"
)

// Source is what the page shows.
type Source struct {
	Status func() namenode.Status
	// Gatherer holds plasma_namenode_commit_duration_seconds, sampled for
	// the chart.
	Gatherer prometheus.Gatherer
	Recent   *metrics.RecentLog
	// DatanodeAdmin maps a datanode's data address to its admin address
	// (host:port), for links to its page.
	DatanodeAdmin map[string]string
}

// Page serves the status page and samples the commit counters for its
// chart.
type Page struct {
	src Source

	mu      sync.Mutex
	samples []sample // oldest first, at most keep
}

// sample is the commit counters at one time.
type sample struct {
	at       time.Time
	commits  uint64  // acknowledged commits so far
	latSum   float64 // seconds, of all of them
	latCount uint64
}

// keep samples cover the chart: 60 samples every 5 s are 5 minutes.
const (
	keep        = 60
	SampleEvery = 5 * time.Second
)

// New returns the page of src.
func New(src Source) *Page { return &Page{src: src} }

// Run samples every interval until stop is closed.
func (p *Page) Run(stop <-chan struct{}, interval time.Duration) {
	p.sample()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			p.sample()
		}
	}
}

func (p *Page) sample() {
	s := sample{at: time.Now()}
	if mfs, err := p.src.Gatherer.Gather(); err == nil {
		for _, mf := range mfs {
			if mf.GetName() != "plasma_namenode_commit_duration_seconds" {
				continue
			}
			for _, m := range mf.GetMetric() {
				h := m.GetHistogram()
				s.latSum += h.GetSampleSum()
				s.latCount += h.GetSampleCount()
			}
		}
	}
	s.commits = s.latCount
	p.mu.Lock()
	defer p.mu.Unlock()
	p.samples = append(p.samples, s)
	if len(p.samples) > keep {
		p.samples = p.samples[len(p.samples)-keep:]
	}
}

// point is one interval of the chart.
type point struct {
	at      time.Time
	rate    float64 // commits per second
	latency float64 // mean commit latency in ms (0: no commits)
}

func (p *Page) points() []point {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []point
	for i := 1; i < len(p.samples); i++ {
		a, b := p.samples[i-1], p.samples[i]
		dt := b.at.Sub(a.at).Seconds()
		if dt <= 0 {
			continue
		}
		pt := point{at: b.at, rate: float64(b.commits-a.commits) / dt}
		if n := b.latCount - a.latCount; n > 0 {
			pt.latency = (b.latSum - a.latSum) / float64(n) * 1000
		}
		out = append(out, pt)
	}
	return out
}

// view is what the template renders.
type view struct {
	Status    namenode.Status
	State     string // "healthy", "degraded", "no datanodes"
	StateOK   bool
	Live      int
	Dead      int
	Datanodes []nodeView
	UsedPct   int
	UsedHuman string
	CapHuman  string
	Rate      chart
	Latency   chart
	Errors    []metrics.LogRecord
	// Blocks that need attention: counts ("…" until first counted).
	Health  namenode.BlockHealth
	Under   string
	Counted string
}

type nodeView struct {
	namenode.DatanodeStatus
	UsedPct   int
	UsedHuman string
	CapHuman  string
	Seen      string
	AdminURL  string
}

func (p *Page) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/" {
		http.NotFound(w, r)
		return
	}
	st := p.src.Status()
	v := view{Status: st}
	bs := uint64(st.Blocksize)
	var used, total uint64
	for _, d := range st.Datanodes {
		nv := nodeView{DatanodeStatus: d, UsedPct: pct(d.Used, d.Blocks), UsedHuman: human(d.Used * bs), CapHuman: human(d.Blocks * bs), Seen: "never"}
		if !d.LastSeen.IsZero() {
			nv.Seen = st.Time.Sub(d.LastSeen).Round(time.Second).String() + " ago"
		}
		if a := p.src.DatanodeAdmin[d.Addr]; a != "" {
			nv.AdminURL = adminURL(r, a)
		}
		if d.Alive {
			v.Live++
		} else {
			v.Dead++
		}
		used += d.Used
		total += d.Blocks
		v.Datanodes = append(v.Datanodes, nv)
	}
	v.UsedPct, v.UsedHuman, v.CapHuman = pct(used, total), human(used*bs), human(total*bs)
	switch {
	case len(st.Datanodes) == 0:
		v.State = "no datanodes"
	case v.Dead > 0:
		v.State = fmt.Sprintf("degraded: %d of %d datanodes dead", v.Dead, len(st.Datanodes))
	case st.Health.Lost > 0:
		v.State = fmt.Sprintf("degraded: %d blocks lost", st.Health.Lost)
	case st.Health.UnderReplicated > 0:
		v.State = fmt.Sprintf("degraded: %d blocks under-replicated", st.Health.UnderReplicated)
	default:
		v.State, v.StateOK = "healthy", true
	}
	v.Health, v.Under, v.Counted = st.Health, "…", "not yet counted"
	if h := st.Health; !h.At.IsZero() {
		v.Under = fmt.Sprint(h.UnderReplicated)
		v.Counted = "counted " + st.Time.Sub(h.At).Round(time.Second).String() + " ago"
	}
	pts := p.points()
	v.Rate = newChart(pts, func(p point) float64 { return p.rate }, "commits/s")
	v.Latency = newChart(pts, func(p point) float64 { return p.latency }, "ms")
	if p.src.Recent != nil {
		v.Errors = p.src.Recent.Records()
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if err := page.Execute(w, v); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}

// adminURL links to a datanode's admin address a, with the scheme the
// page was reached by; a loopback host is as reachable as the namenode's
// own page is.
func adminURL(r *http.Request, a string) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	if host, port, err := net.SplitHostPort(a); err == nil && (host == "" || host == "0.0.0.0" || host == "::") {
		h, _, _ := net.SplitHostPort(r.Host)
		a = net.JoinHostPort(h, port)
	}
	return scheme + "://" + a + "/metrics"
}

func pct(a, b uint64) int {
	if b == 0 {
		return 0
	}
	return int(a * 100 / b)
}

func human(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// chart is a small line chart as an SVG polyline.
type chart struct {
	Points string // "x,y x,y ..." in a 300×80 box
	Last   string
	Max    string
	Unit   string
	Empty  bool
}

func newChart(pts []point, val func(point) float64, unit string) chart {
	c := chart{Unit: unit, Empty: len(pts) < 2}
	if c.Empty {
		return c
	}
	var top float64
	for _, p := range pts {
		top = max(top, val(p))
	}
	if top == 0 {
		top = 1
	}
	var b strings.Builder
	for i, p := range pts {
		// The newest point at the right edge; the box spans keep samples.
		x := 300 - float64(len(pts)-1-i)*300/float64(keep-2)
		y := 78 - val(p)/top*74
		fmt.Fprintf(&b, "%.1f,%.1f ", x, y)
	}
	c.Points = b.String()
	c.Last = fmt.Sprintf("%.3g", val(pts[len(pts)-1]))
	c.Max = fmt.Sprintf("%.3g", top)
	return c
}

var page = template.Must(template.New("status").Parse(pageHTML))
