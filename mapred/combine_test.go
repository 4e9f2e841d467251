package mapred

import (
	"bufio"
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"testing"
)

func sumValues(key []byte, values [][]byte, emit Emit) error {
	n := 0
	for _, v := range values {
		k, err := strconv.Atoi(string(v))
		if err != nil {
			return err
		}
		n += k
	}
	return emit(key, []byte(strconv.Itoa(n)))
}

var wordCount = Funcs{
	Map: func(line []byte, emit Emit) error {
		for _, w := range bytes.Fields(line) {
			if err := emit(w, []byte("1")); err != nil {
				return err
			}
		}
		return nil
	},
	Combine: sumValues,
}

// runMapTask runs a Go-API map task over input and returns its output
// lines.
func runMapTask(t *testing.T, f Funcs, input string, readBuf int) ([]string, error) {
	t.Helper()
	var out bytes.Buffer
	w := bufio.NewWriter(&out)
	err := f.runTask("map", []string{FormatLines, "0"}, 1, bufio.NewReaderSize(strings.NewReader(input), readBuf), w)
	w.Flush()
	return strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n"), err
}

// The in-mapper combiner: what leaves the map task sums to the exact
// counts, with far fewer records than words, also when its table is
// flushed many times (a small sort buffer) and with lines longer than
// the reader's buffer.
func TestInMapperCombiner(t *testing.T) {
	var in strings.Builder
	want := map[string]int{}
	words := 0
	for i := range 20000 {
		w := fmt.Sprintf("w%d", (i*i)%97)
		if i%5000 == 0 {
			w = strings.Repeat("long", 50) // with its line, beyond the 16-byte reader
		}
		want[w]++
		words++
		in.WriteString(w)
		if i%7 == 0 {
			in.WriteByte('\n')
		} else {
			in.WriteByte(' ')
		}
	}
	// 64 KiB: a table of 32 KiB, flushed again and again.
	for _, buf := range []string{"", "65536"} {
		t.Run("sortbuffer="+buf, func(t *testing.T) {
			t.Setenv("PLASMAMR_SORT_BUFFER", buf)
			lines, err := runMapTask(t, wordCount, in.String(), 16)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]int{}
			for _, l := range lines {
				k, v, _ := strings.Cut(l, "\t")
				n, err := strconv.Atoi(v)
				if err != nil {
					t.Fatalf("line %q", l)
				}
				got[k] += n
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("counts differ:\n got %v\nwant %v", got, want)
			}
			t.Logf("%d records out of %d words, %d distinct", len(lines), words, len(want))
			if buf == "" && len(lines) != len(want) || len(lines) > words/4 {
				t.Fatalf("%d records out of %d words (%d distinct): not combined", len(lines), words, len(want))
			}
		})
	}
}

// A combiner that changes the key fails the task, naming the keys.
func TestInMapperCombinerKeepsKey(t *testing.T) {
	f := wordCount
	f.Combine = func(key []byte, values [][]byte, emit Emit) error { return emit([]byte("other"), []byte("1")) }
	_, err := runMapTask(t, f, "a a a\n", 4096)
	if err == nil || !strings.Contains(err.Error(), `given key "a" and emitted key "other"`) {
		t.Fatalf("err = %v", err)
	}
}
