package wire

// Journaled small writes (issue 27 item 1; docs/design.md, "Journaled
// small appends").
//
// A durable commit whose only data is a small in-place extension of a
// file's last block may carry those bytes (Request.Journal, on the
// request that attaches the block) instead of having the datanodes sync
// them first: the namenode writes them into its commit log with the
// commit, which makes them durable with the log's one fsync, and the
// datanodes sync afterwards, in the background. A datanode registering
// after a restart gets the writes it may have lost back in the answer
// (Response.Journal) and applies them before it takes writes.

// MaxJournalBytes is the most data one commit may journal; larger writes
// are synced on the datanodes before their commit, as before.
const MaxJournalBytes = 4096

// JournalWrite is one journaled extension of a block in place. From a
// client (Request.Journal, with the attach request of file Ino): Index is
// the file's block and Offset where Data starts in it (the block's
// committed length, as the append ticket named it). To a datanode
// (Response.Journal of a registration): Block is its slot on that
// datanode, Gen the block's generation, CRC the checksum of the block
// once Data is in place, Index and Ino name the file's block for logs.
type JournalWrite struct {
	Ino    uint64
	Index  uint64
	Block  uint64
	Gen    uint64
	Offset uint32
	CRC    uint32
	Data   []byte
}

func encJournal(e *Enc, js []JournalWrite) {
	e.Uv(uint64(len(js)))
	for _, j := range js {
		e.Uv(j.Ino)
		e.Uv(j.Index)
		e.Uv(j.Block)
		e.Uv(j.Gen)
		e.Uv(uint64(j.Offset))
		e.U32(j.CRC)
		e.Bytes(j.Data)
	}
}

func decJournal(d *Dec) []JournalWrite {
	n := d.Len(MaxList, 6)
	out := make([]JournalWrite, 0, n)
	for i := 0; i < n && d.Err == nil; i++ {
		var j JournalWrite
		j.Ino = d.Uv()
		j.Index = d.Uv()
		j.Block = d.Uv()
		j.Gen = d.Uv()
		off := d.Uv()
		if off > 1<<31 {
			d.fail("journal write offset out of range")
		}
		j.Offset = uint32(off)
		j.CRC = d.U32()
		j.Data = d.Bytes(MaxBytes)
		out = append(out, j)
	}
	return out
}
