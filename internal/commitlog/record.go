package commitlog

import "encoding/binary"

// HeaderLen is the size of a record's header (length, checksum, sequence
// number); the payload follows it.
const HeaderLen = headerLen

// AppendRecord appends the record of payload with sequence number seq to
// b, in the log's format, for another append-only file of records (the
// namenode group's Raft log).
func AppendRecord(b []byte, seq uint64, payload []byte) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(len(payload)))
	b = binary.LittleEndian.AppendUint32(b, checksum(seq, payload))
	b = binary.LittleEndian.AppendUint64(b, seq)
	return append(b, payload...)
}

// ParseHeader returns a record header's payload length, checksum and
// sequence number; hdr holds HeaderLen bytes.
func ParseHeader(hdr []byte) (n uint32, sum uint32, seq uint64) {
	return binary.LittleEndian.Uint32(hdr[0:]), binary.LittleEndian.Uint32(hdr[4:]), binary.LittleEndian.Uint64(hdr[8:])
}

// Intact tells whether payload and seq match the checksum sum of their
// header: false for a torn or overwritten record.
func Intact(seq uint64, payload []byte, sum uint32) bool { return checksum(seq, payload) == sum }
