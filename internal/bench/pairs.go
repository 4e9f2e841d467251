package bench

import (
	"fmt"
	"time"
)

// pairedRates times transfers of one size in pairs, each of ours right
// after its reference, so that slow drifts of the disk (burst credits,
// writeback of earlier runs) hit both alike; the ratio reported is the
// median of the per-pair ratios.
type pairedRates struct {
	bytes  int64
	series map[string]*pairSeries
}

type pairSeries struct{ ours, ref, ratio []float64 }

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
	var dr, do time.Duration
	timeRef := func() (err error) {
		if dr, err = timeIt(ref); err != nil {
			return fmt.Errorf("%s reference: %w", key, err)
		}
		return nil
	}
	timeOurs := func() (err error) {
		if do, err = timeIt(ours); err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
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
