package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"time"

	"github.com/plasmafs/plasma/client"
)

// SecurityOptions compare two clusters that differ only in security level.
type SecurityOptions struct {
	Secure, Plain client.Config // e.g. privacy/auth and none/none
	N             int           // metadata round trips per round
	FileSize      int64         // bytes of the file read in blocks
}

// Security measures what the security levels cost: synchronous stat
// round trips on the secure cluster's namenode against the plain one, and
// 1 MiB block reads over TCP (no local short-circuit) against the plain
// datanodes. Rounds alternate between the clusters; medians are reported.
func Security(ctx context.Context, o SecurityOptions) (*Report, error) {
	rep := &Report{Bench: "security", Started: time.Now(), Params: fmt.Sprintf("secure=%s/%s plain=%s/%s n=%d file=%d",
		o.Secure.Security, o.Secure.DataSecurity, o.Plain.Security, o.Plain.DataSecurity, o.N, o.FileSize)}
	type side struct {
		cfg   client.Config
		c     *client.Client
		stat  []float64
		reads []float64
	}
	sides := []*side{{cfg: o.Secure}, {cfg: o.Plain}}
	const name = "/plasma-bench-security"
	for _, s := range sides {
		s.cfg.NoShortCircuit = true
		c, err := client.New(ctx, s.cfg)
		if err != nil {
			return nil, err
		}
		defer c.Close()
		s.c = c
		removeIfExists(ctx, c, name)
		if _, err := c.CopyIn(ctx, io.LimitReader(zeroReader{}, o.FileSize), name, client.CopyOptions{Rep: 1}); err != nil {
			return nil, err
		}
	}
	for round := 0; round < 3; round++ {
		for _, s := range sides {
			rate, err := parallel(ctx, s.cfg, 1, o.N, func(ctx context.Context, c *client.Client, tx *client.Txn) error {
				_, err := tx.Stat(ctx, 1)
				return err
			})
			if err != nil {
				return nil, err
			}
			s.stat = append(s.stat, rate)
			var buf bytes.Buffer
			d, err := timeIt(func() error { buf.Reset(); return getTo(ctx, s.c, name, io.Discard) })
			if err != nil {
				return nil, err
			}
			s.reads = append(s.reads, mbps(o.FileSize, d))
		}
	}
	sec, plain := sides[0], sides[1]
	rep.add(Result{Name: fmt.Sprintf("stat round trips at %s", o.Secure.Security), Unit: "req/s", Ours: median(sec.stat),
		RefName: "same at " + o.Plain.Security, Ref: median(plain.stat)})
	rep.add(Result{Name: fmt.Sprintf("1 MiB block reads over TCP at %s", o.Secure.DataSecurity), Unit: "MB/s", Ours: median(sec.reads),
		RefName: "same at " + o.Plain.DataSecurity, Ref: median(plain.reads)})
	return rep, nil
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
