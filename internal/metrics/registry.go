package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Namespace prefixes every Plasma metric name.
const Namespace = "plasma"

// NewRegistry returns a registry holding the Go runtime and process
// collectors, for one daemon's own metrics to join.
func NewRegistry() *prometheus.Registry {
	r := prometheus.NewRegistry()
	r.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return r
}

// Requests counts a daemon's requests by operation (a small fixed set
// of names: never a path or a user). It is a collector to register.
type Requests struct{ *prometheus.CounterVec }

// NewRequests makes plasma_<subsystem>_requests_total.
func NewRequests(subsystem, help string) *Requests {
	return &Requests{prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Subsystem: subsystem, Name: "requests_total", Help: help,
	}, []string{"op"})}
}

// Inc counts one request of op.
func (r *Requests) Inc(op string) { r.WithLabelValues(op).Inc() }
