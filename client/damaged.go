package client

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/plasmafs/plasma/internal/wire"
)

// reportTimeout bounds a damaged-replica report: the read it follows
// goes on whatever becomes of it.
const reportTimeout = 5 * time.Second

// reportDamaged tells the namenode that replica l of block idx failed the
// committed checksum crc, if err (why reading it failed) says so; other
// failures (a datanode down, a stale ticket) are not reported. The
// namenode has the datanode verify the block and, if it is damaged,
// heals it from a good replica as it does a scrub finding
// (namenode/readerreport.go). The report is best effort: its own failure
// is ignored, and the read goes on with the next replica.
func (tx *Txn) reportDamaged(ctx context.Context, ino, idx uint64, l location, crc uint32, err error) {
	// The datanode's own check ("checksum mismatch", its ErrChecksum) or
	// ours (ErrChecksum).
	if !errors.Is(err, ErrChecksum) && !strings.Contains(err.Error(), "checksum mismatch") {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, reportTimeout)
	defer cancel()
	x := wire.Extent{Index: idx, Count: 1, Replicas: []wire.Run{{Node: l.info.ID, Start: l.block}}, CRC: []uint32{crc}}
	tx.c.call(ctx, &wire.Request{Op: wire.OpReplicaDamaged, Ino: ino, Index: idx, Extents: []wire.Extent{x}, ReqID: tx.reqID()})
}
