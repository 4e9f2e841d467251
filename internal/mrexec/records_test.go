package mrexec

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// Splitting at any offsets hands every line to exactly one split, whole.
func TestFeedSplitOwnsEachLineOnce(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for iter := 0; iter < 300; iter++ {
		var b bytes.Buffer
		for n := r.IntN(40); n > 0; n-- {
			b.WriteString(strings.Repeat("x", r.IntN(3)*r.IntN(50)))
			b.WriteByte('\n')
		}
		if r.IntN(2) == 0 {
			b.WriteString("tail")
		}
		data := b.Bytes()
		size := int64(len(data))
		var cuts []int64
		for n := r.IntN(8); n > 0; n-- {
			cuts = append(cuts, r.Int64N(size+1))
		}
		cuts = append(cuts, 0, size)
		slices.Sort(cuts)
		cuts = slices.Compact(cuts)
		var got bytes.Buffer
		records := int64(0)
		for i := 0; i+1 < len(cuts); i++ {
			e := &exec1{t: Task{Start: cuts[i], End: cuts[i+1]}}
			if err := e.feedSplit(bytes.NewReader(data), size, &got, 16); err != nil {
				t.Fatal(err)
			}
			records += e.res.Counters.MapInRecords
		}
		want := string(data)
		if want != "" && !strings.HasSuffix(want, "\n") {
			want += "\n"
		}
		if got.String() != want {
			t.Fatalf("cuts %v of %q: got %q", cuts, data, got.String())
		}
		if n := int64(strings.Count(want, "\n")); records != n {
			t.Fatalf("cuts %v: %d records, want %d", cuts, records, n)
		}
	}
}

type memFile struct{ bytes.Buffer }

func (m *memFile) ReadAt(p []byte, off int64) (int, error) {
	return bytes.NewReader(m.Bytes()).ReadAt(p, off)
}

// Sorting in a small buffer with spills, merging in passes of a small
// fan-in, gives each partition's records in order.
func TestSpillAndMerge(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const parts = 3
	var want [parts][]string
	buf := &sortBuf{limit: 16 << 10}
	var runs []run
	spill := func() {
		m := &memFile{}
		w := newCountWriter(m, 4096)
		offs, err := buf.writeSorted(w, parts)
		if err != nil || w.Flush() != nil {
			t.Fatal(err)
		}
		runs = append(runs, run{ra: m, offs: offs})
	}
	for i := 0; i < 20000; i++ {
		line := fmt.Sprintf("k%d\tv%d", r.IntN(500), r.IntN(100))
		if r.IntN(1000) == 0 {
			line = "big\t" + strings.Repeat("y", 20000) // larger than the buffer
		}
		p := Partition(keyOf([]byte(line)), parts)
		want[p] = append(want[p], line)
		if !buf.add(p, []byte(line)) {
			spill()
			if !buf.add(p, []byte(line)) {
				t.Fatal("empty buffer refused a record")
			}
		}
	}
	spill()
	if len(runs) < 10 {
		t.Fatalf("only %d spills", len(runs))
	}
	narrowed, passes, err := narrow(runs, parts, 4096, 3, func() (io.ReaderAt, io.Writer, func() error, error) {
		m := &memFile{}
		return m, m, func() error { return nil }, nil
	})
	if err != nil || len(narrowed) > 3 || passes < 2 {
		t.Fatalf("narrow: %d runs after %d passes, %v", len(narrowed), passes, err)
	}
	for p := 0; p < parts; p++ {
		var got []string
		err := mergePart(narrowed, p, 4096, func(l []byte) error { got = append(got, string(l)); return nil })
		if err != nil {
			t.Fatal(err)
		}
		slices.SortFunc(want[p], func(a, b string) int { return compareLines([]byte(a), []byte(b)) })
		if !slices.Equal(got, want[p]) {
			t.Fatalf("partition %d: %d records, want %d (or out of order)", p, len(got), len(want[p]))
		}
	}
}

func TestIndexRoundTrip(t *testing.T) {
	m := &memFile{}
	w := newCountWriter(m, 64)
	w.Write([]byte("a\nb\n"))
	offs := []int64{0, 2, 2, 4}
	if err := writeIndex(w, offs); err != nil || w.Flush() != nil {
		t.Fatal(err)
	}
	got, err := readIndex(m, int64(m.Len()))
	if err != nil || !slices.Equal(got, offs) {
		t.Fatalf("index %v, %v", got, err)
	}
	if _, err := readIndex(m, int64(m.Len()-1)); err == nil {
		t.Fatal("truncated index accepted")
	}
}
