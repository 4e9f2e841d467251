package namenode

import (
	"fmt"
	"path/filepath"

	"github.com/plasmafs/plasma/internal/meta"
	"github.com/plasmafs/plasma/internal/wire"
)

// backup writes a consistent copy of the metadata to q.Path, a new file on
// the namenode's host (superuser only). The store serialises the copy with
// the committer's writes: commits wait while it runs, nothing else does.
func (n *Namenode) backup(c *conn, id uint64, q *wire.Request) {
	if who := c.who; who != nil && !who.Super() {
		c.send(id, &wire.Response{Code: wire.ErrCodePerm, Msg: "backup: only the superuser may back up the metadata"})
		return
	}
	b, ok := n.cfg.Store.(meta.Backuper)
	if !ok {
		c.send(id, &wire.Response{Code: wire.ErrCodeUnavailable, Msg: "backup: this metadata store cannot make backups"})
		return
	}
	if !filepath.IsAbs(q.Path) {
		c.send(id, &wire.Response{Code: wire.ErrCodeInvalid, Msg: fmt.Sprintf("backup: %q is not an absolute path on the namenode's host", q.Path)})
		return
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		resp := &wire.Response{}
		// The store must hold everything logged so far.
		if err := n.waitCheckpoint(); err != nil {
			resp = &wire.Response{Code: wire.ErrCodeInternal, Msg: "backup: " + err.Error()}
		} else if err := b.Backup(q.Path); err != nil {
			resp = &wire.Response{Code: wire.ErrCodeInternal, Msg: err.Error()}
		} else {
			n.log.Info("metadata backed up", "file", q.Path)
		}
		c.sendAsync(id, resp)
	}()
}
