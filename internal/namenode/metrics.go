package namenode

// Prometheus metrics of the namenode. The counters 'plasma admin stats'
// shows (requests per operation, commits, batches) are read from where
// the namenode keeps them; the gauges are read under the namenode lock at
// each scrape. Only what nothing kept before is observed here: latencies,
// commit batch sizes, fsyncs and failed requests by code.

import (
	"strconv"
	"time"

	"github.com/plasmafs/plasma/internal/wire"
	"github.com/prometheus/client_golang/prometheus"
)

// observer holds the namenode's own histograms and counters. A nil
// observer observes nothing.
type observer struct {
	opSeconds     *prometheus.HistogramVec // by op: requests answered at once
	commitSeconds *prometheus.HistogramVec // by mode: commit request to acknowledgement
	commits       *prometheus.CounterVec   // by mode
	batchCommits  prometheus.Histogram
	fsyncSeconds  prometheus.Histogram
	failed        *prometheus.CounterVec // by code
	conflicts     prometheus.Counter
}

// latencyBuckets span 50µs to about 3s.
var latencyBuckets = prometheus.ExponentialBuckets(50e-6, 2.5, 13)

func newObserver() *observer {
	return &observer{
		opSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "plasma", Subsystem: "namenode", Name: "request_duration_seconds",
			Help: "Time to handle a request answered at once (commits: see commit_duration_seconds), by operation.", Buckets: latencyBuckets}, []string{"op"}),
		commitSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "plasma", Subsystem: "namenode", Name: "commit_duration_seconds",
			Help: "Time from a commit request to its acknowledgement, by mode (durable: after fsync; async: once applied).", Buckets: latencyBuckets}, []string{"mode"}),
		commits: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "plasma", Subsystem: "namenode", Name: "commits_by_mode_total",
			Help: "Transactions committed, by mode (durable or async)."}, []string{"mode"}),
		batchCommits: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "plasma", Subsystem: "namenode", Name: "commit_batch_size",
			Help: "Commits written together in one batch (group commit).", Buckets: prometheus.ExponentialBuckets(1, 2, 11)}),
		fsyncSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "plasma", Subsystem: "namenode", Name: "fsync_duration_seconds",
			Help: "Time to make the commit log (or store) durable, per fsync.", Buckets: latencyBuckets}),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "plasma", Subsystem: "namenode", Name: "request_errors_total",
			Help: "Requests answered with an error, by error code."}, []string{"code"}),
		conflicts: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "plasma", Subsystem: "namenode", Name: "conflicts_total",
			Help: "Requests refused for a conflict with another transaction (lock held, try again)."}),
	}
}

func mode(async bool) string {
	if async {
		return "async"
	}
	return "durable"
}

// request observes a request of op handled in took.
func (o *observer) request(op wire.Op, took time.Duration) {
	if o != nil {
		o.opSeconds.WithLabelValues(op.String()).Observe(took.Seconds())
	}
}

// committed observes a commit acknowledged took after it was requested.
func (o *observer) committed(async bool, took time.Duration) {
	if o != nil {
		o.commitSeconds.WithLabelValues(mode(async)).Observe(took.Seconds())
	}
}

// batch observes a batch written: its size and its commits by mode.
func (o *observer) batch(batch []*commitReq) {
	if o == nil {
		return
	}
	var n, async int
	for _, r := range batch {
		if r.tx != nil {
			n++
			if r.async {
				async++
			}
		}
	}
	if n == 0 {
		return
	}
	o.batchCommits.Observe(float64(n))
	o.commits.WithLabelValues("async").Add(float64(async))
	o.commits.WithLabelValues("durable").Add(float64(n - async))
}

// fsync observes one sync that began at start.
func (o *observer) fsync(start time.Time) {
	if o != nil {
		o.fsyncSeconds.Observe(time.Since(start).Seconds())
	}
}

// refused observes a request answered with code.
func (o *observer) refused(code wire.Code) {
	if o == nil {
		return
	}
	o.failed.WithLabelValues(codeName(code)).Inc()
	if code == wire.ErrCodeConflict {
		o.conflicts.Inc()
	}
}

var codeNames = [...]string{"ok", "not_found", "exists", "not_dir", "is_dir", "not_empty", "conflict", "invalid",
	"no_space", "perm", "txn", "unavailable", "name_too_long", "loop", "internal"}

func codeName(c wire.Code) string {
	if int(c) < len(codeNames) {
		return codeNames[c]
	}
	return "code_" + strconv.Itoa(int(c))
}

// Collector returns the namenode's metrics, to be registered on a
// registry (see internal/metrics).
func (n *Namenode) Collector() prometheus.Collector { return nnCollector{n} }

type nnCollector struct{ n *Namenode }

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc("plasma_namenode_"+name, help, labels, nil)
}

var (
	descRequests  = desc("requests_total", "Requests received, by operation.", "op")
	descCommits   = desc("commits_total", "Transactions committed.")
	descBatches   = desc("commit_batches_total", "Commit batches written to the commit log (or store).")
	descTxns      = desc("open_transactions", "Transactions open now.")
	descLocks     = desc("locks_held", "Inode and name locks held by open transactions.")
	descLeases    = desc("directory_leases", "Directory leases held by mounts.")
	descPutOff    = desc("lease_waits_total", "Additions to a leased directory put off until its lease was recalled.")
	descNodes     = desc("datanodes", "Datanodes recorded, by state (live or dead).", "state")
	descBlocks    = desc("blocks", "Blocks of all datanodes, by state (used or free).", "state")
	descNodeUsed  = desc("datanode_blocks", "Blocks of one datanode, by state (used or free).", "node", "state")
	descHeartbeat = desc("datanode_heartbeat_age_seconds", "Time since a datanode's last heartbeat.", "node")
	descNodeLive  = desc("datanode_up", "1 if the datanode is live, 0 if dead.", "node")
	descUnder     = desc("under_replicated_blocks", "Blocks with fewer good replicas than their file's replication, by the re-replication's last full scan.")
	descWaiting   = desc("under_replicated_waiting_blocks", "Under-replicated blocks lacking only replicas on datanodes dead for less than -dead-after.")
	descLost      = desc("lost_blocks", "Blocks with no readable replica, by the last full scan.")
	descQueued    = desc("replication_queue_blocks", "Blocks waiting in the re-replication queue.")
	descDamaged   = desc("damaged_replicas", "Replicas reported damaged (failed checksum) and not yet replaced.")
	descHealthAge = desc("block_count_age_seconds", "Time since the re-replication's last full scan counted under_replicated_blocks and lost_blocks.")
)

func (c nnCollector) Describe(ch chan<- *prometheus.Desc) {
	c.n.obs.describe(ch)
	for _, d := range []*prometheus.Desc{descRequests, descCommits, descBatches, descTxns, descLocks, descLeases,
		descPutOff, descNodes, descBlocks, descNodeUsed, descHeartbeat, descNodeLive, descUnder, descWaiting, descLost, descQueued, descDamaged, descHealthAge} {
		ch <- d
	}
}

func (c nnCollector) Collect(ch chan<- prometheus.Metric) {
	n := c.n
	n.obs.collect(ch)
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	for op := range n.srv.perOp {
		if op != int(wire.OpInvalid) {
			counter(descRequests, n.srv.perOp[op].Load(), wire.Op(op).String())
		}
	}
	counter(descCommits, n.commits.Load())
	counter(descBatches, n.cm.batches.Load())
	st := n.Status()
	gauge(descTxns, float64(st.OpenTxns))
	gauge(descLocks, float64(st.Locks))
	gauge(descLeases, float64(st.Leases))
	counter(descPutOff, st.LeaseWaits)
	var live, dead int
	var used, total uint64
	for _, d := range st.Datanodes {
		up := 0.0
		if d.Alive {
			live++
			up = 1
		} else {
			dead++
		}
		used += d.Used
		total += d.Blocks
		gauge(descNodeUsed, float64(d.Used), d.Identity, "used")
		gauge(descNodeUsed, float64(d.Blocks-d.Used), d.Identity, "free")
		gauge(descNodeLive, up, d.Identity)
		if !d.LastSeen.IsZero() {
			gauge(descHeartbeat, st.Time.Sub(d.LastSeen).Seconds(), d.Identity)
		}
	}
	gauge(descNodes, float64(live), "live")
	gauge(descNodes, float64(dead), "dead")
	h := st.Health
	gauge(descQueued, float64(h.Queued))
	gauge(descDamaged, float64(h.Damaged))
	if !h.At.IsZero() {
		gauge(descUnder, float64(h.UnderReplicated))
		gauge(descWaiting, float64(h.Waiting))
		gauge(descLost, float64(h.Lost))
		gauge(descHealthAge, st.Time.Sub(h.At).Seconds())
	}
	gauge(descBlocks, float64(used), "used")
	gauge(descBlocks, float64(total-used), "free")
}

func (o *observer) describe(ch chan<- *prometheus.Desc) {
	for _, c := range o.all() {
		c.Describe(ch)
	}
}

func (o *observer) collect(ch chan<- prometheus.Metric) {
	for _, c := range o.all() {
		c.Collect(ch)
	}
}

func (o *observer) all() []prometheus.Collector {
	if o == nil {
		return nil
	}
	return []prometheus.Collector{o.opSeconds, o.commitSeconds, o.commits, o.batchCommits, o.fsyncSeconds, o.failed, o.conflicts}
}
