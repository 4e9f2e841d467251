package mrexec

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"
)

// RecordFormat is a file's record format as its name tells it, the way
// the original's auto_input_format chose it: a name ending in .var holds
// length-prefixed records (the original's var_size_format), one ending in
// .fixed<n> records of n bytes (fixed_size_format), any other text lines.
type RecordFormat struct {
	Kind string // FormatLines, FormatFixed or FormatLengthPrefixed
	Size int    // FormatFixed: bytes per record
}

func (f RecordFormat) String() string {
	switch f.Kind {
	case FormatFixed:
		return ".fixed" + strconv.Itoa(f.Size)
	case FormatLengthPrefixed:
		return ".var"
	}
	return "text"
}

// FormatOfName returns the record format the file name's suffix names.
func FormatOfName(name string) (RecordFormat, error) {
	ext := path.Ext(name)
	switch {
	case ext == ".var":
		return RecordFormat{Kind: FormatLengthPrefixed}, nil
	case strings.HasPrefix(ext, ".fixed"):
		n, err := strconv.Atoi(ext[len(".fixed"):])
		if err != nil || n < 1 || n > 1<<30 {
			return RecordFormat{}, fmt.Errorf("%s: suffix %s: .fixed needs the record size in bytes, 1..%d (e.g. .fixed100)", name, ext, 1<<30)
		}
		return RecordFormat{Kind: FormatFixed, Size: n}, nil
	}
	return RecordFormat{Kind: FormatLines}, nil
}

// recordReader returns the records of r in format f one at a time: next
// gives the next record (valid until the following call) or io.EOF.
func recordReader(r io.Reader, f RecordFormat) func() ([]byte, error) {
	br := bufio.NewReaderSize(r, 256<<10)
	switch f.Kind {
	case FormatFixed:
		buf := make([]byte, f.Size)
		return func() ([]byte, error) {
			n, err := io.ReadFull(br, buf)
			if err == io.ErrUnexpectedEOF {
				return nil, fmt.Errorf("the file ends in a partial record of %d bytes (records of %d bytes)", n, f.Size)
			}
			return buf, err
		}
	case FormatLengthPrefixed:
		var buf []byte
		return func() ([]byte, error) {
			var hdr [4]byte
			if _, err := io.ReadFull(br, hdr[:]); err != nil {
				if err == io.ErrUnexpectedEOF {
					return nil, errors.New("the file ends in a truncated length header")
				}
				return nil, err
			}
			n := binary.BigEndian.Uint32(hdr[:])
			if n > MaxPrefixedRecord {
				return nil, fmt.Errorf("record length %d exceeds the limit of %d", n, MaxPrefixedRecord)
			}
			buf = append(buf[:0], make([]byte, n)...)
			if _, err := io.ReadFull(br, buf); err != nil {
				return nil, fmt.Errorf("the file ends inside a record of %d bytes", n)
			}
			return buf, nil
		}
	}
	lr := lineReader{r: br}
	return lr.next
}

// putRecord writes one record to w in format f.
func putRecord(w *bufio.Writer, f RecordFormat, rec []byte) error {
	switch f.Kind {
	case FormatFixed:
		if len(rec) != f.Size {
			return fmt.Errorf("%d bytes, but %s records have %d", len(rec), f, f.Size)
		}
	case FormatLengthPrefixed:
		var hdr [4]byte
		binary.BigEndian.PutUint32(hdr[:], uint32(len(rec)))
		w.Write(hdr[:])
	default:
		if bytes.IndexByte(rec, '\n') >= 0 {
			return errors.New("holds a newline, which cannot be in a text line")
		}
	}
	w.Write(rec)
	if f.Kind == FormatLines {
		return w.WriteByte('\n')
	}
	return nil
}

// Convert copies the records of r, in format from, to w in format to (a
// text line's record is the line without its newline) and returns how
// many it copied. A record the target format cannot hold (a text line of
// the wrong length for .fixed<n>, a record with a newline for text) is an
// error naming its number.
func Convert(r io.Reader, from RecordFormat, w io.Writer, to RecordFormat) (int64, error) {
	next := recordReader(r, from)
	bw := bufio.NewWriterSize(w, 256<<10)
	var n int64
	for {
		rec, err := next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return n, fmt.Errorf("reading %s record %d: %w", from, n+1, err)
		}
		if err := putRecord(bw, to, rec); err != nil {
			return n, fmt.Errorf("record %d: %w", n+1, err)
		}
		n++
	}
	return n, bw.Flush()
}
