package testkit

import (
	"io"
	"net/http"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Scrape fetches http://addr/metrics and parses it with the Prometheus
// text parser; a page that does not parse fails the test.
func Scrape(t *testing.T, addr string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("scrape %s: %v", addr, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("scrape %s: %s: %s", addr, resp.Status, b)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("metrics of %s do not parse: %v", addr, err)
	}
	return mfs
}

// MetricSum is the sum of the values of family name over the series whose
// labels include want (counters, gauges, untyped; histograms: their
// counts). A family missing from mfs fails the test.
func MetricSum(t *testing.T, mfs map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	t.Helper()
	if _, ok := mfs[name]; !ok {
		t.Fatalf("no metric %s", name)
	}
	return MetricSumOr0(mfs, name, want)
}

// MetricSumOr0 is MetricSum, with 0 for a family not (yet) there: a
// labelled family has no series before its first observation.
func MetricSumOr0(mfs map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	mf := mfs[name]
	var sum float64
series:
	for _, m := range mf.GetMetric() {
		for k, v := range want {
			found := false
			for _, l := range m.GetLabel() {
				if l.GetName() == k && l.GetValue() == v {
					found = true
				}
			}
			if !found {
				continue series
			}
		}
		switch {
		case m.Counter != nil:
			sum += m.GetCounter().GetValue()
		case m.Gauge != nil:
			sum += m.GetGauge().GetValue()
		case m.Histogram != nil:
			sum += float64(m.GetHistogram().GetSampleCount())
		case m.Untyped != nil:
			sum += m.GetUntyped().GetValue()
		}
	}
	return sum
}
