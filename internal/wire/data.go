package wire

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
)

// DataOp is an operation of the datanode data-transfer protocol.
type DataOp uint8

const (
	DataWrite    DataOp = 1 + iota // write one block (data follows the header), forward along Chain
	DataRead                       // read one block (data follows the response header)
	DataSync                       // make every write so far durable (fdatasync)
	DataVerify                     // check Count blocks from Block against their stored checksums
	DataIdentity                   // report identity, cluster and blocksize
	DataAdopt                      // a local client wrote Block itself: verify CRC, record it, forward along Chain
	DataExtend                     // write Length bytes at Offset of a committed block in place (append ticket), forward along Chain
	// DataReplicate (re-replication, asked by the namenode): read Block
	// (read ticket), check it against CRC, the committed checksum, and
	// write it to Chain[0] (its write ticket), which checks it again.
	DataReplicate
)

// Hop is a further replica a write is forwarded to.
type Hop struct {
	Addr   string
	Block  uint64
	Ticket []byte
}

// DataReq is the header of a data protocol request.
type DataReq struct {
	Op     DataOp
	Block  uint64
	Count  uint32
	Length uint32 // bytes of data following a write header (≤ blocksize); read: check only this prefix
	CRC    uint32 // CRC32C of the whole zero-padded block (write, extend; read with Length: of the prefix)
	Chain  []Hop
	Ticket []byte
	// Extend: where the data goes in the block, and the checksum of the
	// block as committed (its first Offset bytes, zero-padded), which the
	// datanode's copy must match.
	Offset uint32
	Base   uint32
	// ReqID: the client's request id for the datanode's log (0: none;
	// encoded only when set, last).
	ReqID uint64
}

// DataResp is the header of a data protocol response.
type DataResp struct {
	Status   Code
	Msg      string
	CRC      uint32   // read: stored checksum of the block
	Length   uint32   // read: bytes of data following the header
	Bad      []uint64 // verify: blocks whose checksum does not match
	CRCs     []uint32 // verify: the stored checksum of each block checked
	Identity string
	Cluster  string
	Blocks   uint64
	Bsize    uint32
}

const maxDataHeader = 64 << 10

// MaxVerify is the most blocks one DataVerify request may name: its answer
// (a checksum per block, and the bad blocks) must fit in one header.
const MaxVerify = 4096

func writeHeader(w io.Writer, body []byte) error {
	var l [4]byte
	binary.LittleEndian.PutUint32(l[:], uint32(len(body)))
	if _, err := w.Write(l[:]); err != nil {
		return err
	}
	_, err := w.Write(body)
	return err
}

func readHeader(r *bufio.Reader, buf []byte) ([]byte, error) {
	var l [4]byte
	if _, err := io.ReadFull(r, l[:]); err != nil {
		return nil, err
	}
	n := binary.LittleEndian.Uint32(l[:])
	if n > maxDataHeader {
		return nil, fmt.Errorf("%w: data header length %d", ErrMalformed, n)
	}
	if cap(buf) < int(n) {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	_, err := io.ReadFull(r, buf)
	return buf, err
}

// EncodeDataReq returns the header bytes of q (without the data).
func EncodeDataReq(q *DataReq) []byte {
	e := Enc{B: make([]byte, 0, 64)}
	e.U8(uint8(q.Op))
	e.Uv(q.Block)
	e.Uv(uint64(q.Count))
	e.Uv(uint64(q.Length))
	e.U32(q.CRC)
	e.Uv(uint64(len(q.Chain)))
	for _, h := range q.Chain {
		e.Str(h.Addr)
		e.Uv(h.Block)
		e.Bytes(h.Ticket)
	}
	e.Bytes(q.Ticket)
	e.Uv(uint64(q.Offset))
	e.U32(q.Base)
	if q.ReqID != 0 {
		e.U64(q.ReqID)
	}
	return e.B
}

// FrameDataHeader returns the length-prefixed header of q, ready to be
// followed by the data.
func FrameDataHeader(q *DataReq) []byte {
	body := EncodeDataReq(q)
	out := make([]byte, 4, 4+len(body))
	binary.LittleEndian.PutUint32(out, uint32(len(body)))
	return append(out, body...)
}

// WriteDataReq writes the header of q.
func WriteDataReq(w io.Writer, q *DataReq) error { return writeHeader(w, EncodeDataReq(q)) }

// DecodeDataReq decodes a request header.
func DecodeDataReq(b []byte) (*DataReq, error) {
	d := Dec{B: b}
	q := &DataReq{}
	q.Op = DataOp(d.U8())
	q.Block = d.Uv()
	c := d.Uv()
	if c > MaxList {
		d.fail("block count")
	}
	q.Count = uint32(c)
	l := d.Uv()
	if l > 1<<30 {
		d.fail("data length")
	}
	q.Length = uint32(l)
	q.CRC = d.U32()
	n := d.Len(MaxReplica, 3)
	for i := 0; i < n && d.Err == nil; i++ {
		q.Chain = append(q.Chain, Hop{Addr: d.Str(MaxName), Block: d.Uv(), Ticket: d.Bytes(MaxTicket)})
	}
	q.Ticket = d.Bytes(MaxTicket)
	o := d.Uv()
	if o > 1<<30 {
		d.fail("offset")
	}
	q.Offset = uint32(o)
	q.Base = d.U32()
	if d.Err == nil && len(d.B) != 0 {
		q.ReqID = d.U64()
	}
	if d.Err == nil && len(d.B) != 0 {
		d.fail("trailing bytes")
	}
	if d.Err == nil && (q.Op < DataWrite || q.Op > DataReplicate) {
		d.fail(fmt.Sprintf("unknown data op %d", q.Op))
	}
	if d.Err != nil {
		return nil, fmt.Errorf("decode data request: %w", d.Err)
	}
	return q, nil
}

// ReadDataReq reads and decodes a request header from r.
func ReadDataReq(r *bufio.Reader, buf []byte) (*DataReq, error) {
	b, err := readHeader(r, buf)
	if err != nil {
		return nil, err
	}
	return DecodeDataReq(b)
}

// WriteDataResp writes the header of p.
func WriteDataResp(w io.Writer, p *DataResp) error {
	e := Enc{B: make([]byte, 0, 32)}
	e.U8(uint8(p.Status))
	e.Str(p.Msg)
	e.U32(p.CRC)
	e.Uv(uint64(p.Length))
	e.Uv(uint64(len(p.Bad)))
	for _, b := range p.Bad {
		e.Uv(b)
	}
	e.Uv(uint64(len(p.CRCs)))
	for _, c := range p.CRCs {
		e.U32(c)
	}
	e.Str(p.Identity)
	e.Str(p.Cluster)
	e.Uv(p.Blocks)
	e.Uv(uint64(p.Bsize))
	return writeHeader(w, e.B)
}

// ReadDataResp reads and decodes a response header from r.
func ReadDataResp(r *bufio.Reader) (*DataResp, error) {
	b, err := readHeader(r, nil)
	if err != nil {
		return nil, err
	}
	d := Dec{B: b}
	p := &DataResp{}
	p.Status = Code(d.U8())
	p.Msg = d.Str(4096)
	p.CRC = d.U32()
	l := d.Uv()
	if l > 1<<30 {
		d.fail("data length")
	}
	p.Length = uint32(l)
	n := d.Len(MaxList, 1)
	for i := 0; i < n && d.Err == nil; i++ {
		p.Bad = append(p.Bad, d.Uv())
	}
	n = d.Len(MaxList, 4)
	for i := 0; i < n && d.Err == nil; i++ {
		p.CRCs = append(p.CRCs, d.U32())
	}
	p.Identity = d.Str(MaxName)
	p.Cluster = d.Str(MaxName)
	p.Blocks = d.Uv()
	p.Bsize = uint32(d.Uv())
	if d.Err == nil && len(d.B) != 0 {
		d.fail("trailing bytes")
	}
	if d.Err != nil {
		return nil, fmt.Errorf("decode data response: %w", d.Err)
	}
	return p, nil
}
