package mapred

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/plasmafs/plasma/internal/mrexec"
)

// Emit writes one record of a Go-API job's output: a key, which may not
// hold a TAB or a newline, and a value, which may not hold a newline.
type Emit func(key, value []byte) error

// Funcs are a job's functions in Go. A Go-API job is one executable: its
// main calls ServeTask first, which turns the process into a task when a task
// server starts it so, and otherwise submits the job (Job.Use, Run). The
// task servers run the same executable, at the same path on every host,
// as the original Plasma required the same executable on every node.
type Funcs struct {
	// Map is called with each input record (a line without its newline,
	// a fixed-size record, or a length-prefixed record's bytes). The
	// record's bytes are valid only during the call.
	Map func(record []byte, emit Emit) error
	// Combine, optional, is called in the map tasks with a key and some
	// of its values, any number of times (inside the map task's process
	// on what Map emitted, and on each sorted run); what it emits replaces
	// them. It must keep the key.
	Combine func(key []byte, values [][]byte, emit Emit) error
	// Reduce, optional (nil: the identity), is called with each key and
	// all its values, in key order.
	Reduce func(key []byte, values [][]byte, emit Emit) error
	// Partition, optional (nil: hash of the key), picks the reduce
	// partition of a key, 0 <= p < parts.
	Partition func(key []byte, parts int) int
}

// defaultCombineMemory bounds the in-mapper combiner's table when the
// task server did not say the job's sort buffer.
const defaultCombineMemory = 32 << 20

// taskArg marks a process started as a task of a Go-API job.
const taskArg = "__plasmamr_task"

// ServeTask runs this process as a task if a task server started it so,
// and reports whether it did, with the task's error. Call it first in
// main, and return when it was a task (exiting non-zero on an error):
//
//	if task, err := funcs.ServeTask(); task {
//		if err != nil {
//			fmt.Fprintln(os.Stderr, err)
//			os.Exit(1)
//		}
//		return
//	}
func (f Funcs) ServeTask() (bool, error) {
	if len(os.Args) < 3 || os.Args[1] != taskArg {
		return false, nil
	}
	parts, _ := strconv.Atoi(os.Getenv("PLASMAMR_PARTITIONS"))
	w := bufio.NewWriterSize(os.Stdout, 64<<10)
	err := f.runTask(os.Args[2], os.Args[3:], parts, bufio.NewReaderSize(os.Stdin, 64<<10), w)
	if err == nil {
		err = w.Flush()
	}
	if err != nil {
		return true, fmt.Errorf("%s task: %w", os.Args[2], err)
	}
	return true, nil
}

// Use makes j run f: its map, combine and reduce commands run exe (an
// absolute path) as tasks. Set j.InputFormat and j.RecordSize first.
func (j *Job) Use(exe string, f Funcs) error {
	if f.Map == nil {
		return errors.New("a Go-API job needs a Map function")
	}
	if !strings.HasPrefix(exe, "/") {
		return fmt.Errorf("executable %q: the task servers need an absolute path", exe)
	}
	q := "'" + strings.ReplaceAll(exe, "'", `'\''`) + "' " + taskArg
	format := j.InputFormat
	if format == "" {
		format = FormatLines
	}
	j.Map = fmt.Sprintf("%s map %s %d", q, format, j.RecordSize)
	j.Combine, j.Reduce = "", ""
	if f.Combine != nil {
		j.Combine = q + " combine"
	}
	if f.Reduce != nil {
		j.Reduce = q + " reduce"
	}
	j.MapPartitions = f.Partition != nil
	return nil
}

// runTask runs one task of kind "map" (args: input format, record size),
// "combine" or "reduce" over r, writing to w: what ServeTask does in a task
// process. parts is the job's number of partitions.
func (f Funcs) runTask(kind string, args []string, parts int, r *bufio.Reader, w *bufio.Writer) error {
	switch kind {
	case "map":
		if len(args) != 2 {
			return fmt.Errorf("map task: want input format and record size, got %q", args)
		}
		size, _ := strconv.Atoi(args[1])
		emit := func(key, value []byte) error { return writeRecord(w, -1, key, value) }
		if f.Partition != nil {
			if parts < 1 {
				return errors.New("map task: PLASMAMR_PARTITIONS not set")
			}
			emit = func(key, value []byte) error {
				p := f.Partition(key, parts)
				if p < 0 || p >= parts {
					return fmt.Errorf("Partition(%q, %d) = %d: out of range", key, parts, p)
				}
				return writeRecord(w, p, key, value)
			}
		}
		if f.Combine != nil {
			limit := defaultCombineMemory
			if n, err := strconv.ParseInt(os.Getenv("PLASMAMR_SORT_BUFFER"), 10, 64); err == nil && n > 0 {
				limit = int(min(n/2, 1<<30))
			}
			mc := newMapCombiner(f.Combine, emit, limit)
			err := readRecords(r, args[0], size, func(rec []byte) error { return f.Map(rec, mc.add) })
			if err == nil {
				err = mc.flush()
			}
			return err
		}
		return readRecords(r, args[0], size, func(rec []byte) error { return f.Map(rec, emit) })
	case "combine", "reduce":
		fn := f.Reduce
		if kind == "combine" {
			fn = f.Combine
		}
		if fn == nil {
			return fmt.Errorf("%s task: the job has no %s function", kind, kind)
		}
		emit := func(key, value []byte) error { return writeRecord(w, -1, key, value) }
		return groupByKey(r, func(key []byte, values [][]byte) error { return fn(key, values, emit) })
	}
	return fmt.Errorf("unknown task kind %q", kind)
}

// writeRecord writes "key TAB value", preceded by "p TAB" when the map
// task partitions its own output (Job.MapPartitions).
func writeRecord(w *bufio.Writer, p int, key, value []byte) error {
	if bytes.ContainsAny(key, "\t\n") || bytes.IndexByte(value, '\n') >= 0 {
		return fmt.Errorf("record %q: a key may not hold a TAB or a newline, a value no newline", key)
	}
	if p >= 0 {
		w.WriteString(strconv.Itoa(p))
		w.WriteByte('\t')
	}
	w.Write(key)
	w.WriteByte('\t')
	w.Write(value)
	return w.WriteByte('\n')
}

// readRecords calls fn with each record of r in the given input format.
func readRecords(r *bufio.Reader, format string, size int, fn func([]byte) error) error {
	switch format {
	case FormatLines:
		// ReadSlice hands out the reader's buffer: no allocation per line
		// unless a line is longer than the buffer.
		var long []byte
		for {
			line, err := r.ReadSlice('\n')
			if err == bufio.ErrBufferFull {
				long = append(long, line...)
				continue
			}
			if len(long) > 0 {
				line = append(long, line...)
				long = long[:0]
			}
			if len(line) > 0 {
				if ferr := fn(bytes.TrimSuffix(line, []byte{'\n'})); ferr != nil {
					return ferr
				}
			}
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
		}
	case FormatFixed:
		if size < 1 {
			return fmt.Errorf("fixed-size records of %d bytes", size)
		}
		buf := make([]byte, size)
		for {
			if _, err := io.ReadFull(r, buf); err == io.EOF {
				return nil
			} else if err != nil {
				return fmt.Errorf("a cut record: %w", err)
			}
			if err := fn(buf); err != nil {
				return err
			}
		}
	case FormatLengthPrefixed:
		var hdr [4]byte
		for {
			if _, err := io.ReadFull(r, hdr[:]); err == io.EOF {
				return nil
			} else if err != nil {
				return fmt.Errorf("a cut record length: %w", err)
			}
			n := binary.BigEndian.Uint32(hdr[:])
			if n > mrexec.MaxPrefixedRecord {
				return fmt.Errorf("record of %d bytes", n)
			}
			rec := make([]byte, n)
			if _, err := io.ReadFull(r, rec); err != nil {
				return fmt.Errorf("a cut record: %w", err)
			}
			if err := fn(rec); err != nil {
				return err
			}
		}
	}
	return fmt.Errorf("unknown input format %q", format)
}

// groupByKey reads sorted "key TAB value" lines and calls fn with each
// key and its values.
func groupByKey(r *bufio.Reader, fn func(key []byte, values [][]byte) error) error {
	var key []byte
	var values [][]byte
	have := false
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 {
			line = bytes.TrimSuffix(line, []byte{'\n'})
			k, v, _ := bytes.Cut(line, []byte{'\t'})
			if have && !bytes.Equal(k, key) {
				if ferr := fn(key, values); ferr != nil {
					return ferr
				}
				values = nil
			}
			key, have = k, true
			values = append(values, v)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
	}
	if have {
		return fn(key, values)
	}
	return nil
}
