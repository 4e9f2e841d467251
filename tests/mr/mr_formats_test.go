package mr

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/tests/testkit"
)

// letters returns n random lowercase letters (no tab, no newline: a record
// that a mapper can print on one line).
func letters(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('a' + r.IntN(26))
	}
	return b
}

// TestMRFixedSizeRecords: 100-byte records without newlines, many of them
// straddling a block (= split) boundary, each reach exactly one map task
// whole: the mapper (fold into 100-byte lines) would misalign on a record
// cut anywhere else, and its output is compared with every record.
func TestMRFixedSizeRecords(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	r := rand.New(rand.NewPCG(7, 8))
	const rs, n = 100, 3000 // 300,000 bytes: 5 blocks of 64 KiB, boundaries inside records
	var data []byte
	var want []string
	for i := 0; i < n; i++ {
		rec := letters(r, rs)
		data = append(data, rec...)
		want = append(want, string(rec[:12])+"\t"+string(rec))
	}
	testkit.MRPut(t, c, "/in", map[string][]byte{"records": data})
	out, code := mrRun(t, c, "-input", "/in", "-output", "/out", "-work", "/work", "-log", "/log",
		"-input-format", "fixed", "-record-size", fmt.Sprint(rs),
		"-map", `fold -w 100 | awk '{print substr($0, 1, 12) "\t" $0}'`, "-partitions", "2", "-split-size", "64K")
	if code != 0 {
		t.Fatalf("mr run: exit %d:\n%s", code, out)
	}
	if tasks := testkit.ReportValue(t, out, "Map tasks"); tasks == "1" {
		t.Fatal("one map task: the file was not split")
	}
	sort.Strings(want)
	testkit.SameLines(t, mrOutput(t, c, "/out", 2, nil), want)
	if got := testkit.ReportValue(t, out, "Map input records"); got != fmt.Sprint(n) {
		t.Fatalf("map input records %s, want %d", got, n)
	}
}

// TestMRLengthPrefixedRecords: records of a 4-byte big-endian length and
// that many bytes, some longer than a block, are read whole (each file by
// one map task) and reach the mapper as they are.
func TestMRLengthPrefixedRecords(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	r := rand.New(rand.NewPCG(9, 10))
	files := map[string][]byte{}
	var want []string
	for f := 0; f < 2; f++ {
		var data []byte
		for i := 0; i < 400; i++ {
			size := r.IntN(400)
			if i%97 == 0 {
				size = 70000 + r.IntN(1000) // longer than a block
			}
			rec := letters(r, size)
			data = binary.BigEndian.AppendUint32(data, uint32(len(rec)))
			data = append(data, rec...)
			want = append(want, fmt.Sprintf("%d\t%s", len(rec), rec))
		}
		files[fmt.Sprintf("f%d", f)] = data
	}
	testkit.MRPut(t, c, "/in", files)
	mapper := `perl -e 'binmode STDIN; while (read(STDIN, $h, 4) == 4) { $n = unpack("N", $h); read(STDIN, $r, $n) == $n or die "short record"; print "$n\t$r\n" }'`
	out, code := mrRun(t, c, "-input", "/in", "-output", "/out", "-work", "/work", "-log", "/log",
		"-input-format", "length-prefixed", "-map", mapper, "-partitions", "3", "-split-size", "64K")
	if code != 0 {
		t.Fatalf("mr run: exit %d:\n%s", code, out)
	}
	if tasks := testkit.ReportValue(t, out, "Map tasks"); tasks != "2" {
		t.Fatalf("%s map tasks, want one per file (2)", tasks)
	}
	sort.Strings(want)
	testkit.SameLines(t, mrOutput(t, c, "/out", 3, nil), want)
}
