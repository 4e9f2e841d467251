package mrexec

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"strconv"
)

// Input formats (Job.InputFormat).
const (
	FormatLines          = "lines"
	FormatFixed          = "fixed"
	FormatLengthPrefixed = "length-prefixed"
	// FormatAuto chooses each input file's format by its name, as the
	// original's auto_input_format did (FormatOfName).
	FormatAuto = "auto"
)

// MaxPrefixedRecord bounds one length-prefixed record (a damaged length
// must not make a task allocate or stream without end).
const MaxPrefixedRecord = 1 << 30

// feedFixed feeds the records of RecordSize bytes that start in
// [Start, End). A file whose size is not a multiple of the record size
// fails the task: its last record would be cut.
func (e *exec1) feedFixed(in io.ReaderAt, size int64, w io.Writer, readBuf int) error {
	t := e.t
	rs := int64(t.RecordSize)
	if rs <= 0 {
		return fmt.Errorf("%s: fixed-size records need a record size", t.Input)
	}
	if size%rs != 0 {
		return fmt.Errorf("%s: %d bytes is not a whole number of %d-byte records", t.Input, size, rs)
	}
	first := (t.Start + rs - 1) / rs * rs // the first record starting at or after Start
	end := min(t.End, size)
	if first >= end {
		return nil
	}
	last := (end + rs - 1) / rs * rs // records starting before end run to here
	n, err := io.Copy(w, bufio.NewReaderSize(io.NewSectionReader(in, first, last-first), readBuf))
	e.res.Counters.MapInBytes += n
	e.res.Counters.MapInRecords += n / rs
	return err
}

// feedLengthPrefixed feeds a whole file of length-prefixed records (its
// split is the whole file: see planSplits), checking that the last record
// is complete.
func (e *exec1) feedLengthPrefixed(in io.ReaderAt, size int64, w io.Writer, readBuf int) error {
	t := e.t
	if t.Start != 0 {
		return fmt.Errorf("%s: a length-prefixed file is read whole, not from byte %d", t.Input, t.Start)
	}
	br := bufio.NewReaderSize(io.NewSectionReader(in, 0, size), readBuf)
	var hdr [4]byte
	for pos := int64(0); pos < size; {
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			return fmt.Errorf("%s: record at byte %d: truncated length (%v)", t.Input, pos, err)
		}
		n := int64(binary.BigEndian.Uint32(hdr[:]))
		if n > MaxPrefixedRecord || pos+4+n > size {
			return fmt.Errorf("%s: record at byte %d: length %d runs past the end of the file (%d bytes)", t.Input, pos, n, size)
		}
		if _, err := w.Write(hdr[:]); err != nil {
			return err
		}
		if _, err := io.CopyN(w, br, n); err != nil {
			return err
		}
		pos += 4 + n
		e.res.Counters.MapInRecords++
		e.res.Counters.MapInBytes += 4 + n
	}
	return nil
}

// cutPartition splits a map output line "p TAB record" of a map command
// that partitions its own output.
func cutPartition(line []byte, parts int) ([]byte, int, error) {
	ps, rest, ok := bytes.Cut(line, []byte{'\t'})
	p, err := strconv.Atoi(string(ps))
	if !ok || err != nil || p < 0 || p >= parts {
		return nil, 0, fmt.Errorf("map output line %.60q: want a partition number (0..%d), a TAB, then the record", line, parts-1)
	}
	return rest, p, nil
}
