package wire

import (
	"encoding/binary"
	"fmt"
	"io"
)

// Request fields present in an encoding, one bit each.
const (
	rTxn = 1 << iota
	rIno
	rFlags
	rPath
	rPath2
	rType
	rMode
	rUser
	rGroup
	rSize
	rMtime
	rRep
	rIndex
	rCount
	rExtents
	rPref
	rNode
	rIno2
	rReqID
	rJournal
)

// AppendRequest appends the encoding of r to b.
func AppendRequest(b []byte, r *Request) []byte {
	var m uint64
	set := func(cond bool, bit uint64) {
		if cond {
			m |= bit
		}
	}
	set(r.Txn != 0, rTxn)
	set(r.Ino != 0, rIno)
	set(r.Flags != 0, rFlags)
	set(r.Path != "", rPath)
	set(r.Path2 != "", rPath2)
	set(r.Type != 0, rType)
	set(r.Mode != 0, rMode)
	set(r.User != "", rUser)
	set(r.Group != "", rGroup)
	set(r.Size != 0, rSize)
	set(r.Mtime != 0, rMtime)
	set(r.Rep != 0, rRep)
	set(r.Index != 0, rIndex)
	set(r.Count != 0, rCount)
	set(len(r.Extents) > 0, rExtents)
	set(len(r.Pref) > 0, rPref)
	set(r.Node != nil, rNode)
	set(r.Ino2 != 0, rIno2)
	set(r.ReqID != 0, rReqID)
	set(len(r.Journal) > 0, rJournal)
	e := Enc{B: b}
	e.U8(uint8(r.Op))
	e.Uv(m)
	if m&rTxn != 0 {
		e.U64(r.Txn)
	}
	if m&rIno != 0 {
		e.Uv(r.Ino)
	}
	if m&rFlags != 0 {
		e.Uv(uint64(r.Flags))
	}
	if m&rPath != 0 {
		e.Str(r.Path)
	}
	if m&rPath2 != 0 {
		e.Str(r.Path2)
	}
	if m&rType != 0 {
		e.U8(uint8(r.Type))
	}
	if m&rMode != 0 {
		e.Uv(uint64(r.Mode))
	}
	if m&rUser != 0 {
		e.Str(r.User)
	}
	if m&rGroup != 0 {
		e.Str(r.Group)
	}
	if m&rSize != 0 {
		e.I64(r.Size)
	}
	if m&rMtime != 0 {
		e.I64(r.Mtime)
	}
	if m&rRep != 0 {
		e.U8(r.Rep)
	}
	if m&rIndex != 0 {
		e.Uv(r.Index)
	}
	if m&rCount != 0 {
		e.Uv(r.Count)
	}
	if m&rExtents != 0 {
		encExtents(&e, r.Extents)
	}
	if m&rPref != 0 {
		e.Uv(uint64(len(r.Pref)))
		for _, p := range r.Pref {
			e.Str(p)
		}
	}
	if m&rIno2 != 0 {
		e.Uv(r.Ino2)
	}
	if m&rNode != 0 {
		encNode(&e, r.Node)
	}
	if m&rReqID != 0 {
		e.U64(r.ReqID)
	}
	if m&rJournal != 0 {
		encJournal(&e, r.Journal)
	}
	return e.B
}

// DecodeRequest decodes a request; it never panics on bad input.
func DecodeRequest(b []byte) (*Request, error) {
	d := Dec{B: b}
	r := &Request{Op: Op(d.U8())}
	m := d.Uv()
	if m&rTxn != 0 {
		r.Txn = d.U64()
	}
	if m&rIno != 0 {
		r.Ino = d.Uv()
	}
	if m&rFlags != 0 {
		r.Flags = uint32(d.Uv())
	}
	if m&rPath != 0 {
		r.Path = d.Str(MaxPath)
	}
	if m&rPath2 != 0 {
		r.Path2 = d.Str(MaxPath)
	}
	if m&rType != 0 {
		r.Type = FileType(d.U8())
	}
	if m&rMode != 0 {
		r.Mode = uint32(d.Uv())
	}
	if m&rUser != 0 {
		r.User = d.Str(MaxName)
	}
	if m&rGroup != 0 {
		r.Group = d.Str(MaxName)
	}
	if m&rSize != 0 {
		r.Size = d.I64()
	}
	if m&rMtime != 0 {
		r.Mtime = d.I64()
	}
	if m&rRep != 0 {
		r.Rep = d.U8()
	}
	if m&rIndex != 0 {
		r.Index = d.Uv()
	}
	if m&rCount != 0 {
		r.Count = d.Uv()
	}
	if m&rExtents != 0 {
		r.Extents = decExtents(&d)
	}
	if m&rPref != 0 {
		n := d.Len(MaxReplica*4, 1)
		for i := 0; i < n && d.Err == nil; i++ {
			r.Pref = append(r.Pref, d.Str(MaxName))
		}
	}
	if m&rIno2 != 0 {
		r.Ino2 = d.Uv()
	}
	if m&rNode != 0 {
		r.Node = decNode(&d)
	}
	if m&rReqID != 0 {
		r.ReqID = d.U64()
	}
	if m&rJournal != 0 {
		r.Journal = decJournal(&d)
	}
	if d.Err == nil && len(d.B) != 0 {
		d.fail("trailing bytes")
	}
	if d.Err == nil && (r.Op == OpInvalid || r.Op >= opMax) {
		d.fail(fmt.Sprintf("unknown op %d", r.Op))
	}
	if d.Err != nil {
		return nil, fmt.Errorf("decode request: %w", d.Err)
	}
	return r, nil
}

func encExtents(e *Enc, xs []Extent) {
	e.Uv(uint64(len(xs)))
	for _, x := range xs {
		e.Uv(x.Index)
		e.Uv(uint64(x.Count))
		e.Uv(uint64(len(x.Replicas)))
		for _, r := range x.Replicas {
			e.Uv(uint64(r.Node))
			e.Uv(r.Start)
		}
		e.Uv(uint64(len(x.CRC)))
		for _, c := range x.CRC {
			e.U32(c)
		}
		e.Uv(uint64(len(x.Tickets)))
		for _, t := range x.Tickets {
			e.Bytes(t)
		}
		e.Uv(x.Gen)
	}
}

func decExtents(d *Dec) []Extent {
	n := d.Len(MaxList, 4)
	xs := make([]Extent, 0, n)
	for i := 0; i < n && d.Err == nil; i++ {
		var x Extent
		x.Index = d.Uv()
		c := d.Uv()
		if c > MaxList {
			d.fail("extent count")
		}
		x.Count = uint32(c)
		nr := d.Len(MaxReplica, 2)
		x.Replicas = make([]Run, nr)
		for j := range x.Replicas {
			x.Replicas[j].Node = uint32(d.Uv())
			x.Replicas[j].Start = d.Uv()
		}
		nc := d.Len(MaxList, 4)
		if nc != 0 && nc != int(x.Count) {
			d.fail("extent checksum count")
		}
		if nc > 0 {
			x.CRC = make([]uint32, nc)
			for j := range x.CRC {
				x.CRC[j] = d.U32()
			}
		}
		nt := d.Len(MaxReplica, 1)
		for j := 0; j < nt && d.Err == nil; j++ {
			x.Tickets = append(x.Tickets, d.Bytes(MaxTicket))
		}
		x.Gen = d.Uv()
		xs = append(xs, x)
	}
	return xs
}

func encNode(e *Enc, n *NodeInfo) {
	e.Uv(uint64(n.ID))
	e.Str(n.Identity)
	e.Str(n.Cluster)
	e.Str(n.Addr)
	e.Str(n.Socket)
	e.Str(n.Host)
	e.Uv(uint64(n.Blocksize))
	e.Uv(n.Blocks)
	e.Uv(n.Used)
	e.Bool(n.Alive)
	// Enabled and whether a namespace id follows share a byte, so a node
	// without one encodes as before.
	flags := uint8(0)
	if n.Enabled {
		flags |= nodeEnabled
	}
	if n.Namespace != "" {
		flags |= nodeNamespace
	}
	if n.Capacity != 0 || n.UsedBytes != 0 {
		flags |= nodeBytes
	}
	e.U8(flags)
	if n.Namespace != "" {
		e.Str(n.Namespace)
	}
	if flags&nodeBytes != 0 {
		e.Uv(n.Capacity)
		e.Uv(n.UsedBytes)
	}
}

const (
	nodeEnabled   = 1 << iota // NodeInfo.Enabled
	nodeNamespace             // NodeInfo.Namespace follows
	nodeBytes                 // NodeInfo.Capacity and UsedBytes follow
)

func decNode(d *Dec) *NodeInfo {
	n := &NodeInfo{}
	n.ID = uint32(d.Uv())
	n.Identity = d.Str(MaxName)
	n.Cluster = d.Str(MaxName)
	n.Addr = d.Str(MaxName)
	n.Socket = d.Str(MaxPath)
	n.Host = d.Str(MaxName)
	n.Blocksize = uint32(d.Uv())
	n.Blocks = d.Uv()
	n.Used = d.Uv()
	n.Alive = d.Bool()
	flags := d.U8()
	if flags&^(nodeEnabled|nodeNamespace|nodeBytes) != 0 {
		d.fail("node flags")
	}
	n.Enabled = flags&nodeEnabled != 0
	if flags&nodeNamespace != 0 {
		n.Namespace = d.Str(MaxName)
	}
	if flags&nodeBytes != 0 {
		n.Capacity = d.Uv()
		n.UsedBytes = d.Uv()
	}
	return n
}

func encAttr(e *Enc, a *Attr) {
	e.Uv(a.Ino)
	e.U8(uint8(a.Type))
	e.Uv(uint64(a.Mode))
	e.Str(a.User)
	e.Str(a.Group)
	e.I64(a.Size)
	e.Uv(uint64(a.Nlink))
	e.I64(a.Mtime)
	e.I64(a.Ctime)
	e.U8(a.Rep)
	e.Uv(uint64(a.Blocksize))
	e.Uv(a.Seq)
	e.Str(a.Target)
}

func decAttr(d *Dec) *Attr {
	a := &Attr{}
	a.Ino = d.Uv()
	a.Type = FileType(d.U8())
	a.Mode = uint32(d.Uv())
	a.User = d.Str(MaxName)
	a.Group = d.Str(MaxName)
	a.Size = d.I64()
	a.Nlink = uint32(d.Uv())
	a.Mtime = d.I64()
	a.Ctime = d.I64()
	a.Rep = d.U8()
	a.Blocksize = uint32(d.Uv())
	a.Seq = d.Uv()
	a.Target = d.Str(MaxPath)
	return a
}

const (
	pMsg = 1 << iota
	pAttr
	pEntries
	pExtents
	pNodes
	pPaths
	pCounters
	pProblems
	pFiles
	pEntryAttrs // every entry's attributes follow the entries
	pJournal
)

// AppendResponse appends the encoding of r to b.
func AppendResponse(b []byte, r *Response) []byte {
	var m uint64
	if r.Msg != "" {
		m |= pMsg
	}
	if r.Attr != nil {
		m |= pAttr
	}
	if len(r.Entries) > 0 {
		m |= pEntries
	}
	if len(r.Extents) > 0 {
		m |= pExtents
	}
	if len(r.Nodes) > 0 {
		m |= pNodes
	}
	if len(r.Paths) > 0 {
		m |= pPaths
	}
	if len(r.Counters) > 0 {
		m |= pCounters
	}
	if len(r.Problems) > 0 {
		m |= pProblems
	}
	if len(r.Files) > 0 {
		m |= pFiles
	}
	if len(r.Entries) > 0 && r.Entries[0].Attr != nil {
		m |= pEntryAttrs
	}
	if len(r.Journal) > 0 {
		m |= pJournal
	}
	e := Enc{B: b}
	e.U8(uint8(r.Code))
	e.Uv(m)
	if m&pMsg != 0 {
		e.Str(r.Msg)
	}
	if m&pAttr != 0 {
		encAttr(&e, r.Attr)
	}
	if m&pEntries != 0 {
		e.Uv(uint64(len(r.Entries)))
		for _, x := range r.Entries {
			e.Str(x.Name)
			e.Uv(x.Ino)
			e.U8(uint8(x.Type))
		}
		if m&pEntryAttrs != 0 {
			for _, x := range r.Entries {
				a := x.Attr
				if a == nil {
					a = &Attr{}
				}
				encAttr(&e, a)
			}
		}
	}
	if m&pExtents != 0 {
		encExtents(&e, r.Extents)
	}
	if m&pNodes != 0 {
		e.Uv(uint64(len(r.Nodes)))
		for i := range r.Nodes {
			encNode(&e, &r.Nodes[i])
		}
	}
	if m&pPaths != 0 {
		encStrs(&e, r.Paths)
	}
	if m&pCounters != 0 {
		e.Uv(uint64(len(r.Counters)))
		for _, c := range r.Counters {
			e.Uv(c)
		}
	}
	if m&pProblems != 0 {
		encStrs(&e, r.Problems)
	}
	if m&pFiles != 0 {
		e.Uv(uint64(len(r.Files)))
		for _, f := range r.Files {
			e.Str(f.Path)
			e.I64(f.Size)
			e.U8(f.Rep)
			encExtents(&e, f.Extents)
		}
	}
	if m&pJournal != 0 {
		encJournal(&e, r.Journal)
	}
	return e.B
}

func encStrs(e *Enc, ss []string) {
	e.Uv(uint64(len(ss)))
	for _, s := range ss {
		e.Str(s)
	}
}

func decStrs(d *Dec) []string {
	n := d.Len(MaxList, 1)
	ss := make([]string, 0, n)
	for i := 0; i < n && d.Err == nil; i++ {
		ss = append(ss, d.Str(MaxPath*4))
	}
	return ss
}

// DecodeResponse decodes a response; it never panics on bad input.
func DecodeResponse(b []byte) (*Response, error) {
	d := Dec{B: b}
	r := &Response{Code: Code(d.U8())}
	m := d.Uv()
	if m&pMsg != 0 {
		r.Msg = d.Str(MaxBytes)
	}
	if m&pAttr != 0 {
		r.Attr = decAttr(&d)
	}
	if m&pEntries != 0 {
		n := d.Len(MaxList, 3)
		r.Entries = make([]DirEntry, 0, n)
		for i := 0; i < n && d.Err == nil; i++ {
			var x DirEntry
			x.Name = d.Str(MaxName)
			x.Ino = d.Uv()
			x.Type = FileType(d.U8())
			r.Entries = append(r.Entries, x)
		}
		if m&pEntryAttrs != 0 {
			for i := 0; i < len(r.Entries) && d.Err == nil; i++ {
				r.Entries[i].Attr = decAttr(&d)
			}
		}
	}
	if m&pExtents != 0 {
		r.Extents = decExtents(&d)
	}
	if m&pNodes != 0 {
		n := d.Len(MaxList, 10)
		for i := 0; i < n && d.Err == nil; i++ {
			r.Nodes = append(r.Nodes, *decNode(&d))
		}
	}
	if m&pPaths != 0 {
		r.Paths = decStrs(&d)
	}
	if m&pCounters != 0 {
		n := d.Len(MaxList, 1)
		r.Counters = make([]uint64, 0, n)
		for i := 0; i < n && d.Err == nil; i++ {
			r.Counters = append(r.Counters, d.Uv())
		}
	}
	if m&pProblems != 0 {
		r.Problems = decStrs(&d)
	}
	if m&pFiles != 0 {
		n := d.Len(MaxList, 4)
		for i := 0; i < n && d.Err == nil; i++ {
			var f FileBlocks
			f.Path = d.Str(MaxPath)
			f.Size = d.I64()
			f.Rep = d.U8()
			f.Extents = decExtents(&d)
			r.Files = append(r.Files, f)
		}
	}
	if m&pJournal != 0 {
		r.Journal = decJournal(&d)
	}
	if d.Err == nil && len(d.B) != 0 {
		d.fail("trailing bytes")
	}
	if d.Err != nil {
		return nil, fmt.Errorf("decode response: %w", d.Err)
	}
	return r, nil
}

// Frame header: payload length (u32, counting the id) and request id (u64).
const frameHeader = 12

// BeginFrame reserves room for a frame header in b.
func BeginFrame(b []byte) []byte { return append(b[:0], make([]byte, frameHeader)...) }

// FinishFrame fills in the header reserved by BeginFrame.
func FinishFrame(b []byte, id uint64) []byte {
	binary.LittleEndian.PutUint32(b, uint32(len(b)-4))
	binary.LittleEndian.PutUint64(b[4:], id)
	return b
}

// ReadFrame reads one frame into buf (grown as needed) and returns the id and
// payload. A length over MaxFrame is rejected before anything is allocated.
func ReadFrame(r io.Reader, buf []byte) (id uint64, payload []byte, newBuf []byte, err error) {
	return readFrame(r, buf, func(int) error { return nil })
}

// FrameBudget grants the memory of frame buffers past SmallFrame, shared
// by a server's connections (connlimit.Budget).
type FrameBudget interface {
	Acquire(n int) error
	Release(n int)
}

// SmallFrame is the buffer a connection may keep without a budget's grant.
const SmallFrame = 64 << 10

// FrameReader reads the frames of one connection into a buffer it reuses.
// The buffer grows as a payload arrives, in chunks, each past SmallFrame
// granted by Budget first: a peer announcing large frames and sending them
// slowly, or not at all, pins no more than what it sent, and all peers
// together no more than the budget.
type FrameReader struct {
	R      io.Reader
	Budget FrameBudget

	buf  []byte
	held int // granted by Budget for buf
}

// Read reads the next frame. Its payload is valid until Release.
func (f *FrameReader) Read() (id uint64, payload []byte, err error) {
	id, payload, f.buf, err = readFrame(f.R, f.buf, func(newCap int) error {
		need := newCap - SmallFrame - f.held
		if need <= 0 {
			return nil
		}
		if err := f.Budget.Acquire(need); err != nil {
			return err
		}
		f.held += need
		return nil
	})
	if err != nil {
		f.Release()
	}
	return id, payload, err
}

// Release gives back a large frame's buffer and its grant: a connection
// keeps no more than SmallFrame between frames.
func (f *FrameReader) Release() {
	if f.held > 0 || cap(f.buf) > SmallFrame {
		f.buf = nil
		f.Budget.Release(f.held)
		f.held = 0
	}
}

// readFrame reads a frame into buf, calling grow with a new capacity
// before the buffer grows to it.
func readFrame(r io.Reader, buf []byte, grow func(newCap int) error) (id uint64, payload []byte, newBuf []byte, err error) {
	var h [frameHeader]byte
	if _, err = io.ReadFull(r, h[:]); err != nil {
		return 0, nil, buf, err
	}
	n := binary.LittleEndian.Uint32(h[:])
	if n < 8 || n > MaxFrame {
		return 0, nil, buf, fmt.Errorf("%w: frame length %d", ErrMalformed, n)
	}
	id = binary.LittleEndian.Uint64(h[4:])
	pl := int(n) - 8
	// The buffer grows as the payload arrives: a peer announcing a large
	// frame and sending nothing costs no more than what it sent.
	buf = buf[:0]
	for len(buf) < pl {
		chunk := min(pl-len(buf), max(64<<10, len(buf)))
		if cap(buf)-len(buf) < chunk {
			if err = grow(len(buf) + chunk); err != nil {
				return 0, nil, buf, err
			}
			nb := make([]byte, len(buf), len(buf)+chunk)
			copy(nb, buf)
			buf = nb
		}
		if _, err = io.ReadFull(r, buf[len(buf):len(buf)+chunk]); err != nil {
			return 0, nil, buf, err
		}
		buf = buf[:len(buf)+chunk]
	}
	return id, buf, buf, nil
}
