package client

import (
	"bytes"

	"github.com/plasmafs/plasma/internal/wire"
)

// Journaled small appends (Config.JournalSmallWrites; the namenode's
// internal/namenode/journal.go, docs/design.md "Journaled small
// appends"). A durable commit whose only data is small extensions of
// files' last blocks in place skips the datanodes' sync: the extensions'
// bytes travel with the requests that attach the blocks, and the
// namenode's commit log makes them durable with the commit. The namenode
// checks them against the block list; a commit it cannot journal has its
// datanodes synced before its log fsync instead, so it is durable either
// way.

// wroteExtension records an extension in place written to addrs: data at
// offset from of file block idx. Called with w's lock held.
func (w *blockWriter) wroteExtension(addrs []string, idx uint64, from int, data []byte) {
	if !w.tx.c.cfg.JournalSmallWrites || len(data) > wire.MaxJournalBytes {
		w.tx.wroteTo(addrs)
		return
	}
	// A copy: data is a view of a block buffer that goes back to its pool.
	w.journal = append(w.journal, wire.JournalWrite{Index: idx, Offset: uint32(from), Data: bytes.Clone(data)})
	tx := w.tx
	tx.mu.Lock()
	defer tx.mu.Unlock()
	tx.journaled += len(data)
	if tx.nodes == nil {
		tx.nodes = map[string]bool{}
	}
	for _, a := range addrs {
		tx.nodes[a] = true
	}
}

// journalsData reports whether a commit of tx leaves its data to the
// namenode's journal: durable, and all it wrote is journaled extensions
// small enough together.
func (tx *Txn) journalsData() bool {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	return tx.c.cfg.JournalSmallWrites && !tx.async && len(tx.nodes) > 0 && !tx.unjournaled &&
		tx.journaled > 0 && tx.journaled <= wire.MaxJournalBytes
}
