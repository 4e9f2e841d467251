package mrexec

import (
	"bufio"
	"bytes"
	"container/heap"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
)

// Records are text lines "key TAB value" (a line without a TAB is all
// key). They are ordered by key, then by the whole line, so the order is
// total and a job's output does not depend on scheduling.

func keyOf(line []byte) []byte {
	if i := bytes.IndexByte(line, '\t'); i >= 0 {
		return line[:i]
	}
	return line
}

func compareLines(a, b []byte) int {
	if c := bytes.Compare(keyOf(a), keyOf(b)); c != 0 {
		return c
	}
	return bytes.Compare(a, b)
}

// Partition is the default partitioner: FNV-1a of the key, modulo parts.
func Partition(key []byte, parts int) int {
	h := uint32(2166136261)
	for _, c := range key {
		h ^= uint32(c)
		h *= 16777619
	}
	return int(h % uint32(parts))
}

// lineReader reads '\n'-terminated lines; the last one may lack the '\n'.
type lineReader struct {
	r    *bufio.Reader
	long []byte
}

// next returns the next line without its '\n' (valid until the next call),
// or io.EOF.
func (l *lineReader) next() ([]byte, error) {
	b, err := l.r.ReadSlice('\n')
	if err == nil {
		return b[:len(b)-1], nil
	}
	if err != bufio.ErrBufferFull {
		if err == io.EOF && len(b) > 0 {
			return b, nil
		}
		return nil, err
	}
	l.long = append(l.long[:0], b...)
	for {
		b, err = l.r.ReadSlice('\n')
		l.long = append(l.long, b...)
		switch err {
		case nil:
			return l.long[:len(l.long)-1], nil
		case bufio.ErrBufferFull:
		case io.EOF:
			return l.long, nil
		default:
			return nil, err
		}
	}
}

// rec is one record in a sortBuf.
type rec struct {
	off  int
	n    int32
	part int32
}

const recOverhead = 16 // bytes of index per record

// sortBuf collects a map task's output records within a memory limit.
type sortBuf struct {
	limit int64
	arena []byte
	recs  []rec
	// combine, if set, replaces each partition's sorted records by what it
	// returns (the job's combiner), which writeSorted sorts again.
	combine func(lines [][]byte) ([][]byte, error)
}

// add appends a record; false means the buffer is full (the record was not
// added), unless it is empty: a record larger than the whole buffer is
// still taken, alone.
func (b *sortBuf) add(part int, line []byte) bool {
	need := len(b.arena) + len(line)
	if need > cap(b.arena) || len(b.recs) == cap(b.recs) {
		// Grow by doubling, within the limit: the arena gets up to 7/8 of
		// it, the index the rest.
		acap, rcap := cap(b.arena), cap(b.recs)
		if need > acap {
			acap = max(2*acap, need, 64<<10)
		}
		if len(b.recs) == rcap {
			rcap = max(2*rcap, 1024)
		}
		if int64(acap)+int64(rcap)*recOverhead > b.limit {
			if len(b.recs) > 0 {
				return false
			}
			acap = max(need, int(b.limit*7/8))
			rcap = max(1, int(b.limit/8/recOverhead))
		}
		if acap != cap(b.arena) {
			b.arena = append(make([]byte, 0, acap), b.arena...)
		}
		if rcap != cap(b.recs) {
			b.recs = append(make([]rec, 0, rcap), b.recs...)
		}
	}
	b.recs = append(b.recs, rec{off: len(b.arena), n: int32(len(line)), part: int32(part)})
	b.arena = append(b.arena, line...)
	return true
}

func (b *sortBuf) line(r rec) []byte { return b.arena[r.off : r.off+int(r.n)] }

func (b *sortBuf) sort() {
	slices.SortFunc(b.recs, func(x, y rec) int {
		if x.part != y.part {
			return int(x.part - y.part)
		}
		return compareLines(b.line(x), b.line(y))
	})
}

// writeSorted sorts the buffer and writes it, partition after partition, to
// w; it returns the partitions' offsets (parts+1 of them, relative to the
// writer's count at the start) and empties the buffer.
func (b *sortBuf) writeSorted(w *countWriter, parts int) ([]int64, error) {
	b.sort()
	offs := make([]int64, parts+1)
	base := w.n
	i := 0
	for p := 0; p < parts; p++ {
		offs[p] = w.n - base
		if b.combine != nil {
			var lines [][]byte
			for ; i < len(b.recs) && int(b.recs[i].part) == p; i++ {
				lines = append(lines, b.line(b.recs[i]))
			}
			if len(lines) == 0 {
				continue
			}
			out, err := b.combine(lines)
			if err != nil {
				return nil, err
			}
			slices.SortStableFunc(out, compareLines)
			for _, l := range out {
				w.Write(l)
				if err := w.WriteByte('\n'); err != nil {
					return nil, err
				}
			}
			continue
		}
		for ; i < len(b.recs) && int(b.recs[i].part) == p; i++ {
			w.Write(b.line(b.recs[i]))
			if err := w.WriteByte('\n'); err != nil {
				return nil, err
			}
		}
	}
	offs[parts] = w.n - base
	b.arena, b.recs = b.arena[:0], b.recs[:0]
	return offs, w.err
}

// release drops the buffer's memory.
func (b *sortBuf) release() { b.arena, b.recs = nil, nil }

// countWriter is a buffered writer that counts bytes and keeps its first
// error.
type countWriter struct {
	w   *bufio.Writer
	n   int64
	err error
}

func newCountWriter(w io.Writer, size int) *countWriter {
	return &countWriter{w: bufio.NewWriterSize(w, size)}
}

func (c *countWriter) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	c.err = err
	return n, err
}

func (c *countWriter) WriteByte(b byte) error {
	if c.err != nil {
		return c.err
	}
	c.err = c.w.WriteByte(b)
	if c.err == nil {
		c.n++
	}
	return c.err
}

func (c *countWriter) Flush() error {
	if c.err == nil {
		c.err = c.w.Flush()
	}
	return c.err
}

// run is a sorted file of parts partitions: partition i is the bytes
// [offs[i], offs[i+1]) of ra.
type run struct {
	ra   io.ReaderAt
	offs []int64
}

// Map output files end in an index: parts+1 offsets, the number of
// partitions and a magic, all little-endian uint64.
const indexMagic = 0x31305844494d5250 // "PRMIDX01"

func writeIndex(w *countWriter, offs []int64) error {
	var b [8]byte
	all := append(append([]int64(nil), offs...), int64(len(offs)-1), indexMagic)
	for _, o := range all {
		binary.LittleEndian.PutUint64(b[:], uint64(o))
		w.Write(b[:])
	}
	return w.err
}

// readIndex reads the index of a map output file of size bytes.
func readIndex(ra io.ReaderAt, size int64) ([]int64, error) {
	var tail [16]byte
	if size < 16 {
		return nil, errors.New("map output too short for its index")
	}
	if _, err := ra.ReadAt(tail[:], size-16); err != nil {
		return nil, err
	}
	parts := int64(binary.LittleEndian.Uint64(tail[:8]))
	if binary.LittleEndian.Uint64(tail[8:]) != indexMagic || parts < 1 || (parts+3)*8 > size {
		return nil, errors.New("map output has no valid index")
	}
	b := make([]byte, (parts+1)*8)
	if _, err := ra.ReadAt(b, size-16-int64(len(b))); err != nil {
		return nil, err
	}
	offs := make([]int64, parts+1)
	for i := range offs {
		offs[i] = int64(binary.LittleEndian.Uint64(b[8*i:]))
		if offs[i] < 0 || (i > 0 && offs[i] < offs[i-1]) || offs[i] > size-16-int64(len(b)) {
			return nil, fmt.Errorf("map output index corrupt at partition %d", i)
		}
	}
	return offs, nil
}

// mergeSource is one input of a merge.
type mergeSource struct {
	lr   lineReader
	line []byte
}

type mergeHeap []*mergeSource

func (h mergeHeap) Len() int           { return len(h) }
func (h mergeHeap) Less(i, j int) bool { return compareLines(h[i].line, h[j].line) < 0 }
func (h mergeHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *mergeHeap) Push(x any)        { *h = append(*h, x.(*mergeSource)) }
func (h *mergeHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// mergePart merges partition p of runs, calling emit with each line in
// order (without its '\n'; valid only during the call). Each input reads
// through a buffer of readBuf bytes.
func mergePart(runs []run, p int, readBuf int, emit func([]byte) error) error {
	h := make(mergeHeap, 0, len(runs))
	for _, r := range runs {
		n := r.offs[p+1] - r.offs[p]
		if n == 0 {
			continue
		}
		s := &mergeSource{lr: lineReader{r: bufio.NewReaderSize(io.NewSectionReader(r.ra, r.offs[p], n), readBuf)}}
		line, err := s.lr.next()
		if err == io.EOF {
			continue
		}
		if err != nil {
			return err
		}
		s.line = line
		h = append(h, s)
	}
	heap.Init(&h)
	for len(h) > 0 {
		s := h[0]
		if err := emit(s.line); err != nil {
			return err
		}
		line, err := s.lr.next()
		switch {
		case err == io.EOF:
			heap.Pop(&h)
		case err != nil:
			return err
		default:
			s.line = line
			heap.Fix(&h, 0)
		}
	}
	return nil
}

// mergeRuns merges runs of parts partitions into w, partition after
// partition, and returns the offsets of the result.
func mergeRuns(runs []run, parts, readBuf int, w *countWriter) ([]int64, error) {
	offs := make([]int64, parts+1)
	base := w.n
	for p := 0; p < parts; p++ {
		offs[p] = w.n - base
		err := mergePart(runs, p, readBuf, func(line []byte) error {
			w.Write(line)
			return w.WriteByte('\n')
		})
		if err != nil {
			return nil, err
		}
	}
	offs[parts] = w.n - base
	return offs, w.err
}

// mergeBudget says how a sort buffer of limit bytes is spent in merges:
// the read buffer of each input and how many inputs one merge may have.
func mergeBudget(limit int64) (readBuf, fanIn int) {
	readBuf = int(min(max(limit/16, 4<<10), 1<<20))
	fanIn = max(2, int(limit/int64(readBuf))-1) // one buffer's worth for the output
	return readBuf, fanIn
}

// narrow merges runs in groups of at most fanIn into new runs written by
// create until at most fanIn remain. It returns the remaining runs and how
// many merge passes it made.
func narrow(runs []run, parts, readBuf, fanIn int, create func() (io.ReaderAt, io.Writer, func() error, error)) ([]run, int, error) {
	passes := 0
	for len(runs) > fanIn {
		passes++
		var next []run
		for i := 0; i < len(runs); i += fanIn {
			group := runs[i:min(i+fanIn, len(runs))]
			if len(group) == 1 {
				next = append(next, group[0])
				continue
			}
			ra, wr, done, err := create()
			if err != nil {
				return nil, passes, err
			}
			w := newCountWriter(wr, readBuf)
			offs, err := mergeRuns(group, parts, readBuf, w)
			if err == nil {
				err = w.Flush()
			}
			if err == nil {
				err = done()
			}
			if err != nil {
				return nil, passes, err
			}
			next = append(next, run{ra: ra, offs: offs})
		}
		runs = next
	}
	return runs, passes, nil
}
