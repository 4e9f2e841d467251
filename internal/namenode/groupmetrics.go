package namenode

import (
	"strconv"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// MemberMetrics are a group member's metrics for its admin port: its
// place in the group always, and the namenode's own while it leads. The
// namenode changes with each term the member leads, so the collector is
// unchecked (it describes nothing in advance).
type MemberMetrics struct {
	g   *Group
	cur atomic.Pointer[Namenode]
}

// NewMemberMetrics returns the metrics of member g, standing by.
func NewMemberMetrics(g *Group) *MemberMetrics { return &MemberMetrics{g: g} }

// Lead makes n the namenode whose metrics and status are served (nil:
// the member stands by).
func (m *MemberMetrics) Lead(n *Namenode) { m.cur.Store(n) }

var (
	groupTermDesc    = desc("group_term", "Raft term this member is in.", "id")
	groupAppliedDesc = desc("group_applied_index", "Last entry of the group's log this member applied.", "id")
	groupCommitDesc  = desc("group_commit_index", "Last entry of the group's log this member knows committed.", "id")
	groupLeaderDesc  = desc("group_leader", "1 while this member leads the group and serves, else 0.", "id")
)

// Describe implements prometheus.Collector: nothing (unchecked).
func (m *MemberMetrics) Describe(chan<- *prometheus.Desc) {}

// Collect implements prometheus.Collector.
func (m *MemberMetrics) Collect(ch chan<- prometheus.Metric) {
	st := m.g.raft.Stats()
	num := func(k string) float64 {
		v, _ := strconv.ParseUint(st[k], 10, 64)
		return float64(v)
	}
	id := m.g.cfg.Self
	n := m.cur.Load()
	leading := 0.0
	if n != nil {
		leading = 1
	}
	ch <- prometheus.MustNewConstMetric(groupTermDesc, prometheus.GaugeValue, num("term"), id)
	ch <- prometheus.MustNewConstMetric(groupAppliedDesc, prometheus.GaugeValue, num("applied_index"), id)
	ch <- prometheus.MustNewConstMetric(groupCommitDesc, prometheus.GaugeValue, num("commit_index"), id)
	ch <- prometheus.MustNewConstMetric(groupLeaderDesc, prometheus.GaugeValue, leading, id)
	if n != nil {
		n.Collector().Collect(ch)
	}
}

// Status is the leading namenode's status for the status page (empty
// while the member stands by).
func (m *MemberMetrics) Status() Status {
	if n := m.cur.Load(); n != nil {
		return n.Status()
	}
	return Status{}
}
