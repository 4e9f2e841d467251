package client

import (
	"context"

	"github.com/plasmafs/plasma/internal/wire"
)

// Backup makes the namenode write a consistent copy of its metadata to
// path, a new file on the namenode's host (an absolute path; superuser
// only). The copy holds every commit acknowledged before Backup was called;
// commits wait while it is written. Restore it by stopping the namenode,
// removing the database's -wal and -shm files and putting the copy in the
// database's place.
func (c *Client) Backup(ctx context.Context, path string) error {
	_, err := c.call(ctx, &wire.Request{Op: wire.OpBackup, Path: path})
	return err
}
