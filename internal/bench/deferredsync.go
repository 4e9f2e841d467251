package bench

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/plasmafs/plasma/client"
)

// DeferredSyncOptions configures DeferredSync.
type DeferredSyncOptions struct {
	N       int   // files per client
	Clients []int // client counts to run
	Size    int   // bytes per file
	Rep     int   // replication of the files
	Dir     string
}

// DeferredSync creates, writes and commits asynchronously small files
// (each its own transaction) with the datanodes' syncs deferred to the
// namenode's durability point (the default; client.Config.NoDeferDataSync turns it off) beside the
// same without (each commit waits for its datanodes' fdatasync), in the
// same run, at each client count; a Sync at the end of each run is
// counted (it makes everything durable).
func DeferredSync(ctx context.Context, cfg client.Config, o DeferredSyncOptions) (*Report, error) {
	rep := &Report{Bench: "deferred-sync", Started: time.Now(), Params: fmt.Sprintf("n=%d clients=%v size=%d rep=%d", o.N, o.Clients, o.Size, o.Rep)}
	setup, err := client.New(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer setup.Close()
	base := fmt.Sprintf("%s/run-%d", o.Dir, time.Now().UnixNano())
	if err := setup.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
		_, err := tx.MkdirAll(ctx, base, 0)
		return err
	}); err != nil {
		return nil, err
	}
	data := make([]byte, o.Size)
	for i := range data {
		data[i] = byte(i * 7)
	}
	run := func(p int, deferred bool) (float64, error) {
		c := cfg
		c.NoDeferDataSync = !deferred
		dir := fmt.Sprintf("%s/p%d-deferred-%v", base, p, deferred)
		if err := setup.Txn(ctx, func(ctx context.Context, tx *client.Txn) error { _, err := tx.Mkdir(ctx, dir, 0); return err }); err != nil {
			return 0, err
		}
		var seq atomic.Int64
		start := time.Now()
		_, err := parallel(ctx, c, p, o.N, func(ctx context.Context, cl *client.Client, _ *client.Txn) error {
			tx := cl.Begin()
			f, err := tx.CreateFile(ctx, fmt.Sprintf("%s/f%d", dir, seq.Add(1)), client.CreateOptions{Rep: o.Rep})
			if err != nil {
				tx.Abort(ctx)
				return err
			}
			if _, err := f.Write(data); err != nil {
				tx.Abort(ctx)
				return err
			}
			return tx.CommitAsync(ctx)
		})
		if err != nil {
			return 0, err
		}
		if err := setup.Sync(ctx); err != nil {
			return 0, err
		}
		return float64(p*o.N) / time.Since(start).Seconds(), nil
	}
	for _, p := range o.Clients {
		// The reference first, then ours: neither gets a warmer cluster.
		ref, err := run(p, false)
		if err != nil {
			return nil, err
		}
		ours, err := run(p, true)
		if err != nil {
			return nil, err
		}
		rep.add(Result{Name: fmt.Sprintf("%d-byte file create+write+async commit, %d clients", o.Size, p), Unit: "files/s", Ours: ours,
			RefName: "the same, each commit waiting for its datanodes' fdatasync", Ref: ref, Note: "ours: syncs deferred to the namenode's durability point; a Sync at the end counted"})
	}
	return rep, nil
}
