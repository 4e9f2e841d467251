package bench

import (
	"fmt"
	"strings"
	"time"
)

// pairedRates times transfers of one size in pairs, each of ours right
// after its reference, so that slow drifts of the disk (burst credits,
// writeback of earlier runs) hit both alike; the ratio reported is the
// median of the per-pair ratios.
type pairedRates struct {
	bytes  int64
	series map[string]*pairSeries
	// beforeEach, if set, runs untimed before each timed side: to give
	// both the same starting state (a local copy removed, so neither
	// pays for truncating the other's).
	beforeEach func() error
}

type pairSeries struct {
	ours, ref, ratio []float64
	// This process's CPU seconds per timed run (user + system).
	oursCPU, refCPU []float64
}

func newPairedRates(bytes int64) *pairedRates {
	return &pairedRates{bytes: bytes, series: map[string]*pairSeries{}}
}

// run times ref, then ours, and records both rates under key.
func (p *pairedRates) run(key string, ref, ours func() error) error {
	return p.runOrdered(key, false, ref, ours)
}

// runOrdered is run with ours first if oursFirst: alternating the order
// spreads what one leaves to the next (the disk's writeback, the caches)
// over both sides.
func (p *pairedRates) runOrdered(key string, oursFirst bool, ref, ours func() error) error {
	var dr, do, cr, co time.Duration
	prepare := func() error {
		if p.beforeEach == nil {
			return nil
		}
		if err := p.beforeEach(); err != nil {
			return fmt.Errorf("%s: before a timed run: %w", key, err)
		}
		return nil
	}
	timeRef := func() (err error) {
		if err := prepare(); err != nil {
			return err
		}
		c0 := selfCPU()
		if dr, err = timeIt(ref); err != nil {
			return fmt.Errorf("%s reference: %w", key, err)
		}
		cr = selfCPU() - c0
		return nil
	}
	timeOurs := func() (err error) {
		if err := prepare(); err != nil {
			return err
		}
		c0 := selfCPU()
		if do, err = timeIt(ours); err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		co = selfCPU() - c0
		return nil
	}
	first, second := timeRef, timeOurs
	if oursFirst {
		first, second = timeOurs, timeRef
	}
	if err := first(); err != nil {
		return err
	}
	if err := second(); err != nil {
		return err
	}
	s := p.series[key]
	if s == nil {
		s = &pairSeries{}
		p.series[key] = s
	}
	r, m := mbps(p.bytes, dr), mbps(p.bytes, do)
	s.ref, s.ours, s.ratio = append(s.ref, r), append(s.ours, m), append(s.ratio, m/r)
	s.refCPU, s.oursCPU = append(s.refCPU, cr.Seconds()), append(s.oursCPU, co.Seconds())
	return nil
}

// add reports key's medians in MB/s as res (its name, reference and notes
// filled in by the caller), with the median per-pair ratio.
func (p *pairedRates) add(rep *Report, key string, res Result) {
	s := p.series[key]
	res.Unit, res.Ours, res.Ref = "MB/s", median(s.ours), median(s.ref)
	rep.add(res)
	rep.Results[len(rep.Results)-1].Ratio = median(s.ratio)
}

// mediansRatio is the ratio of key's medians (beside the per-pair one).
func (p *pairedRates) mediansRatio(key string) float64 {
	s := p.series[key]
	return median(s.ours) / median(s.ref)
}

// pairRatios lists key's per-pair ratios in the order measured, for a
// report to show their spread beside the median.
func (p *pairedRates) pairRatios(key string) string {
	var b strings.Builder
	for i, r := range p.series[key].ratio {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%.2f", r)
	}
	return b.String()
}

// cpuNote is the median CPU time of this process per run of each side of
// key: steadier than the rates on a machine others load, and the whole
// cost where this process does all of both sides' work.
func (p *pairedRates) cpuNote(key string) string {
	s := p.series[key]
	return fmt.Sprintf("CPU of this process per run: %.2f s, reference %.2f s", median(s.oursCPU), median(s.refCPU))
}
