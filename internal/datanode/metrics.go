package datanode

// Prometheus metrics of a datanode: requests by operation and outcome,
// bytes written and read over the data protocol, checksum failures (kept
// by the block store) and the volume's capacity.

import (
	"github.com/plasmafs/plasma/internal/wire"
	"github.com/prometheus/client_golang/prometheus"
)

// observer counts a datanode's data requests. A nil observer counts
// nothing.
type observer struct {
	requests     *prometheus.CounterVec // by op, outcome
	bytesWritten prometheus.Counter
	bytesRead    prometheus.Counter
}

func newObserver() *observer {
	return &observer{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "plasma", Subsystem: "datanode", Name: "requests_total",
			Help: "Data protocol requests, by operation and outcome (ok or error)."}, []string{"op", "outcome"}),
		bytesWritten: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "plasma", Subsystem: "datanode", Name: "written_bytes_total",
			Help: "Block data stored from data protocol writes (writes, adoptions of locally written blocks, appends)."}),
		bytesRead: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "plasma", Subsystem: "datanode", Name: "read_bytes_total",
			Help: "Block data sent to readers over the data protocol."}),
	}
}

var dataOpNames = map[wire.DataOp]string{wire.DataWrite: "write", wire.DataRead: "read", wire.DataSync: "sync",
	wire.DataVerify: "verify", wire.DataIdentity: "identity", wire.DataAdopt: "adopt", wire.DataExtend: "extend", wire.DataReplicate: "replicate"}

// request counts a request of op answered with resp (q is what was done:
// an empty request if its ticket was refused) and sent bytes of data.
func (o *observer) request(op wire.DataOp, q *wire.DataReq, resp *wire.DataResp, sent int) {
	if o == nil {
		return
	}
	name, ok := dataOpNames[op]
	if !ok {
		name = "unknown"
	}
	outcome := "ok"
	if resp.Status != wire.OK {
		outcome = "error"
	}
	o.requests.WithLabelValues(name, outcome).Inc()
	if resp.Status != wire.OK {
		return
	}
	switch q.Op {
	case wire.DataWrite, wire.DataAdopt, wire.DataExtend:
		o.bytesWritten.Add(float64(q.Length))
	}
	o.bytesRead.Add(float64(sent))
}

// Collector returns the datanode's metrics, to be registered on a
// registry (see internal/metrics).
func (s *Server) Collector() prometheus.Collector { return dnCollector{s} }

type dnCollector struct{ s *Server }

var (
	descChecksums = prometheus.NewDesc("plasma_datanode_checksum_failures_total",
		"Blocks received or read whose data did not match their checksum.", nil, nil)
	descCapacity = prometheus.NewDesc("plasma_datanode_capacity_blocks",
		"Blocks the volume holds (which are used is the namenode's to say: plasma_namenode_datanode_blocks).", nil, nil)
	descBlocksize = prometheus.NewDesc("plasma_datanode_block_size_bytes", "The volume's blocksize.", nil, nil)
	descCopyWait  = prometheus.NewDesc("plasma_datanode_copy_throttled_seconds_total",
		"Time re-replication copies this datanode sends waited for its copy bandwidth (-copy-rate).", nil, nil)
	descKept = prometheus.NewDesc("plasma_datanode_kept_bytes",
		"Bytes a sparse volume keeps on disk in empty slots for their next blocks (not counted as used; written over or given back on demand).", nil, nil)
)

func (c dnCollector) Describe(ch chan<- *prometheus.Desc) {
	c.s.obs.requests.Describe(ch)
	ch <- c.s.obs.bytesWritten.Desc()
	ch <- c.s.obs.bytesRead.Desc()
	ch <- descChecksums
	ch <- descCapacity
	ch <- descBlocksize
	ch <- descCopyWait
	ch <- descKept
}

func (c dnCollector) Collect(ch chan<- prometheus.Metric) {
	o, st := c.s.obs, c.s.store
	o.requests.Collect(ch)
	ch <- o.bytesWritten
	ch <- o.bytesRead
	ch <- prometheus.MustNewConstMetric(descChecksums, prometheus.CounterValue, float64(st.badChecksums.Load()))
	ch <- prometheus.MustNewConstMetric(descCapacity, prometheus.GaugeValue, float64(st.Config.Blocks))
	ch <- prometheus.MustNewConstMetric(descBlocksize, prometheus.GaugeValue, float64(st.Config.Blocksize))
	ch <- prometheus.MustNewConstMetric(descCopyWait, prometheus.CounterValue, c.s.copies.waitedSeconds())
	ch <- prometheus.MustNewConstMetric(descKept, prometheus.GaugeValue, float64(st.KeptBytes()))
}
