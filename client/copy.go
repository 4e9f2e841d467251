package client

import (
	"context"
	"fmt"
	"io"
	"io/fs"
)

// CopyOptions control CopyIn.
type CopyOptions struct {
	Rep  int         // replication (0: cluster default)
	Mode fs.FileMode // permission bits (0: 0644)
	// CommitEvery commits after this many bytes and continues in a new
	// transaction, so a long copy never holds one giant transaction
	// (0: one transaction). A failure after a partial commit leaves the
	// committed prefix in place and reports how far it got.
	CommitEvery int64
	// Topology is how the blocks reach their replicas (default Chain).
	Topology Topology
}

// CopyIn creates path and fills it with everything read from r. It
// returns the number of bytes committed.
func (c *Client) CopyIn(ctx context.Context, r io.Reader, path string, opt CopyOptions) (int64, error) {
	tx := c.Begin()
	f, err := tx.CreateFile(ctx, path, CreateOptions{Rep: opt.Rep, Mode: opt.Mode})
	if err != nil {
		tx.Abort(ctx)
		return 0, err
	}
	f.SetTopology(opt.Topology)
	ino := f.Ino()
	var committed, sinceCommit int64
	for {
		// Read straight into a block buffer that the file then owns.
		buf := getBlockBuf(f.bs, false)
		n, rerr := io.ReadFull(r, buf)
		if n > 0 {
			if err := f.appendBlock(buf, n); err != nil {
				tx.Abort(ctx)
				return committed, err
			}
			sinceCommit += int64(n)
		} else {
			putBlockBuf(buf)
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			break
		}
		if rerr != nil {
			tx.Abort(ctx)
			return committed, fmt.Errorf("%s: reading input: %w", path, rerr)
		}
		if opt.CommitEvery > 0 && sinceCommit >= opt.CommitEvery {
			pos := f.pos
			if err := tx.Commit(ctx); err != nil {
				return committed, err
			}
			committed += sinceCommit
			sinceCommit = 0
			tx = c.Begin()
			if f, err = tx.OpenInode(ctx, ino); err != nil {
				tx.Abort(ctx)
				return committed, fmt.Errorf("%s: reopen after partial commit: %w", path, err)
			}
			f.path = path
			f.pos = pos
			f.SetTopology(opt.Topology)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return committed, err
	}
	return committed + sinceCommit, nil
}
