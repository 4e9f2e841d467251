package bench

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/auth"
)

// SecurityOptions compare two clusters that differ only in security level.
type SecurityOptions struct {
	Secure, Plain client.Config // e.g. privacy/auth and none/none
	N             int           // metadata round trips per round
	FileSize      int64         // bytes of the file read in blocks
}

// Security measures what the security levels cost: synchronous stat
// round trips on the secure cluster's namenode against the plain one, and
// 1 MiB block reads over TCP (no local short-circuit): at the secure
// cluster's data level against the plain datanodes, and at each stronger
// data level (integrity, privacy; a datanode accepts clients asking for
// more than its level) against the secure cluster's own level. Rounds
// alternate between the sides; medians are reported.
func Security(ctx context.Context, o SecurityOptions) (*Report, error) {
	rep := &Report{Bench: "security", Started: time.Now(), Params: fmt.Sprintf("secure=%s/%s plain=%s/%s n=%d file=%d",
		o.Secure.Security, o.Secure.DataSecurity, o.Plain.Security, o.Plain.DataSecurity, o.N, o.FileSize)}
	type side struct {
		cfg   client.Config
		c     *client.Client
		stat  []float64
		reads []float64
	}
	// Stronger data levels on the secure cluster, read the same file.
	if o.Secure.DataSecurity == "" {
		o.Secure.DataSecurity = "auth" // the client's default
	}
	secData, err := auth.ParseLevel(o.Secure.DataSecurity)
	if err != nil {
		return nil, err
	}
	sides := []*side{{cfg: o.Secure}, {cfg: o.Plain}}
	var stronger []*side
	for _, lv := range []auth.Level{auth.Integrity, auth.Privacy} {
		if lv.Stronger(secData) {
			cfg := o.Secure
			cfg.DataSecurity = lv.String()
			stronger = append(stronger, &side{cfg: cfg})
		}
	}
	const name = "/plasma-bench-security"
	for _, s := range append(append([]*side(nil), sides...), stronger...) {
		s.cfg.NoShortCircuit = true
		c, err := client.New(ctx, s.cfg)
		if err != nil {
			return nil, err
		}
		defer c.Close()
		s.c = c
	}
	for _, s := range sides {
		removeIfExists(ctx, s.c, name)
		if _, err := s.c.CopyIn(ctx, io.LimitReader(zeroReader{}, o.FileSize), name, client.CopyOptions{Rep: 1}); err != nil {
			return nil, err
		}
	}
	read := func(s *side) error {
		d, err := timeIt(func() error { return getTo(ctx, s.c, name, io.Discard) })
		if err != nil {
			return fmt.Errorf("read at %s: %w", s.cfg.DataSecurity, err)
		}
		s.reads = append(s.reads, mbps(o.FileSize, d))
		return nil
	}
	for round := 0; round < 3; round++ {
		for _, s := range sides {
			rate, err := parallel(ctx, s.cfg, 1, o.N, func(ctx context.Context, c *client.Client, tx *client.Txn) error {
				_, err := tx.StatInode(ctx, 1)
				return err
			})
			if err != nil {
				return nil, err
			}
			s.stat = append(s.stat, rate)
			if err := read(s); err != nil {
				return nil, err
			}
		}
		for _, s := range stronger {
			if err := read(s); err != nil {
				return nil, err
			}
		}
	}
	sec, plain := sides[0], sides[1]
	rep.add(Result{Name: fmt.Sprintf("stat round trips at %s", o.Secure.Security), Unit: "req/s", Ours: median(sec.stat),
		RefName: "same at " + o.Plain.Security, Ref: median(plain.stat)})
	rep.add(Result{Name: fmt.Sprintf("1 MiB block reads over TCP at %s", o.Secure.DataSecurity), Unit: "MB/s", Ours: median(sec.reads),
		RefName: "same at " + o.Plain.DataSecurity, Ref: median(plain.reads)})
	for _, s := range stronger {
		rep.add(Result{Name: fmt.Sprintf("1 MiB block reads over TCP at %s", s.cfg.DataSecurity), Unit: "MB/s", Ours: median(s.reads),
			RefName: "same at " + o.Secure.DataSecurity, Ref: median(sec.reads)})
	}
	return rep, nil
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
