package mr

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/mapred"
	"github.com/plasmafs/plasma/tests/testkit"
)

// writeJob writes a job file of the given lines and returns its name.
func writeJob(t *testing.T, lines ...string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "job.toml")
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestMRStreamingOriginalEnv: the commands of a streaming job get every
// PLASMAMR_* variable the original's streaming mode set, with the job's
// values: name, job and request ids, task prefix, a local directory that
// exists while the task runs and is gone afterwards, a local log
// directory whose files end up in the job's PlasmaFS log directory under
// the task prefix, the input, output, work and log directories, the
// bigblock (split) size, the partitions and the reducer's partition.
func TestMRStreamingOriginalEnv(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	testkit.MRPut(t, c, "/in", map[string][]byte{"a.txt": []byte("one line\n")})
	vars := "NAME JOB_ID REQ_ID TASK_PREFIX LOCAL_DIR LOCAL_LOG_DIR INPUT_DIR OUTPUT_DIR WORK_DIR LOG_DIR BIGBLOCK_SIZE PARTITIONS"
	mapper := `cat >/dev/null; for v in ` + vars + `; do eval "x=\$PLASMAMR_$v"; printf 'map_%s\t%s\n' "$v" "$x"; done
test -d "$PLASMAMR_LOCAL_DIR" && test -w "$PLASMAMR_LOCAL_DIR" && printf 'map_LOCAL_DIR_USABLE\tyes\n'
echo "log of the map" > "$PLASMAMR_LOCAL_LOG_DIR/mine.log"
echo "already prefixed" > "$PLASMAMR_LOCAL_LOG_DIR/${PLASMAMR_TASK_PREFIX}own.log"`
	reducer := `cat; printf 'reduce_PARTITION\t%s\nreduce_REQ_ID\t%s\n' "$PLASMAMR_PARTITION" "$PLASMAMR_REQ_ID"`
	script := filepath.Join(t.TempDir(), "mapper.sh") // the tasks run on this machine
	if err := os.WriteFile(script, []byte(mapper+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	job := writeJob(t, `name = "envjob"`, `input = "/in"`, `output = "/out"`, `work = "/work"`, `log = "/logs"`,
		`map = "sh `+script+`"`, `reduce = '''`+reducer+`'''`, `partitions = 1`, `split_size = "1M"`)
	out, code := mrRun(t, c, job)
	if code != 0 {
		t.Fatalf("mr run: exit %d\n%s", code, out)
	}
	id := mrJobID.FindStringSubmatch(out)
	if id == nil {
		t.Fatalf("no job id in:\n%s", out)
	}
	got := map[string]string{}
	for _, l := range testkit.PartLines(t, c, "/out", 1)[0] {
		k, v, _ := strings.Cut(l, "\t")
		got[k] = v
	}
	want := map[string]string{
		"map_NAME": "envjob", "map_JOB_ID": id[1], "map_INPUT_DIR": "/in", "map_OUTPUT_DIR": "/out",
		"map_WORK_DIR": "/work/" + id[1], "map_LOG_DIR": "/logs/" + id[1], "map_BIGBLOCK_SIZE": "1048576",
		"map_PARTITIONS": "1", "map_LOCAL_DIR_USABLE": "yes", "reduce_PARTITION": "0",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q (all: %q)", k, got[k], v, got)
		}
	}
	req := got["map_REQ_ID"]
	if !regexp.MustCompile(`^map-00000\.a\d+$`).MatchString(req) || !strings.HasPrefix(got["reduce_REQ_ID"], "reduce-00000.a") {
		t.Errorf("request ids %q and %q, want map-00000.aN and reduce-00000.aN", req, got["reduce_REQ_ID"])
	}
	if got["map_TASK_PREFIX"] != req+"-" {
		t.Errorf("task prefix %q, want %q", got["map_TASK_PREFIX"], req+"-")
	}
	for _, k := range []string{"map_LOCAL_DIR", "map_LOCAL_LOG_DIR"} {
		if !filepath.IsAbs(got[k]) {
			t.Fatalf("%s = %q: not a local directory", k, got[k])
		}
		if _, err := os.Stat(got[k]); !os.IsNotExist(err) {
			t.Errorf("%s %s still exists after the job (%v)", k, got[k], err)
		}
	}
	logDir := "/logs/" + id[1] + "/"
	if s := c.MustRun("cat", logDir+req+"-mine.log"); s != "log of the map\n" {
		t.Errorf("%smine.log in the log directory: %q", req+"-", s)
	}
	if s := c.MustRun("cat", logDir+req+"-own.log"); s != "already prefixed\n" {
		t.Errorf("%sown.log in the log directory: %q", req+"-", s)
	}
}

// TestMRStreamingExtractModes: extract_mode key_tab_value partitions by
// the field before the first TAB (every value of a key lands in the
// key's partition); key_tab_partition_tab_value sends each line to the
// partition its second field names, whole and ordered by key; a partition
// number out of range fails the job naming the line.
func TestMRStreamingExtractModes(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	const keys, parts = 200, 4
	var in strings.Builder
	for i := 0; i < keys; i++ {
		fmt.Fprintf(&in, "%d\n", i)
	}
	testkit.MRPut(t, c, "/in", map[string][]byte{"n.txt": []byte(in.String())})

	// key_tab_value: three values per key, each key in its own partition.
	job := writeJob(t, `input = "/in"`, `output = "/kv"`, `work = "/work"`, `partitions = 4`,
		`extract_mode = "key_tab_value"`, `map = '''awk '{ for (v = 0; v < 3; v++) printf "k%s\t%s-%d\n", $1, $1, v }' '''`)
	if out, code := mrRun(t, c, job); code != 0 {
		t.Fatalf("mr run key_tab_value: exit %d\n%s", code, out)
	}
	n := 0
	for p, lines := range testkit.PartLines(t, c, "/kv", parts) {
		for _, l := range lines {
			key, _, _ := strings.Cut(l, "\t")
			if want := mapred.Partition([]byte(key), parts); want != p {
				t.Fatalf("key_tab_value: line %q in partition %d, its key's is %d", l, p, want)
			}
			n++
		}
	}
	if n != 3*keys {
		t.Fatalf("key_tab_value: %d output lines, want %d", n, 3*keys)
	}

	// key_tab_partition_tab_value: the mapper chooses the partition.
	job = writeJob(t, `input = "/in"`, `output = "/kpv"`, `work = "/work"`, `partitions = 4`,
		`extract_mode = "key_tab_partition_tab_value"`, `map = '''awk '{ printf "key%05d\t%d\tvalue %s\n", $1, $1 % 4, $1 }' '''`)
	if out, code := mrRun(t, c, job); code != 0 {
		t.Fatalf("mr run key_tab_partition_tab_value: exit %d\n%s", code, out)
	}
	n = 0
	for p, lines := range testkit.PartLines(t, c, "/kpv", parts) {
		if !sort.StringsAreSorted(lines) {
			t.Errorf("partition %d not sorted by key: %q", p, lines)
		}
		for _, l := range lines {
			f := strings.Split(l, "\t")
			i, err := strconv.Atoi(strings.TrimPrefix(f[0], "key"))
			if len(f) != 3 || err != nil || f[1] != strconv.Itoa(i%4) || f[2] != "value "+strconv.Itoa(i) {
				t.Fatalf("line %q: not as the mapper wrote it", l)
			}
			if i%4 != p {
				t.Fatalf("line %q in partition %d, it names %d", l, p, i%4)
			}
			n++
		}
	}
	if n != keys {
		t.Fatalf("key_tab_partition_tab_value: %d output lines, want %d", n, keys)
	}

	job = writeJob(t, `input = "/in"`, `output = "/bad"`, `work = "/work"`, `partitions = 4`, `max_attempts = 1`,
		`extract_mode = "key_tab_partition_tab_value"`, `map = '''awk '{ printf "k\t9\tv\n" }' '''`)
	if out, code := mrRun(t, c, job); code != 1 || !strings.Contains(out, "partition number (0..3)") {
		t.Fatalf("partition 9 of 4: exit %d, want 1 naming the range\n%s", code, out)
	}
	job = writeJob(t, `input = "/in"`, `output = "/bad2"`, `work = "/work"`, `extract_mode = "value"`, `map = "cat"`)
	if out, code := mrRun(t, c, job); code != 2 || !strings.Contains(out, "key_tab_partition_tab_value") {
		t.Fatalf("unknown extract mode: exit %d, want 2 listing the modes\n%s", code, out)
	}
}

// TestMRLocalInputOutput: a job's input and output directories may be
// local (file::); the output appears whole as local part files holding
// exactly the input's lines, the PlasmaFS work directory keeps nothing,
// and an existing local output is refused before anything runs.
func TestMRLocalInputOutput(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	dir := t.TempDir()
	in := filepath.Join(dir, "in")
	os.Mkdir(in, 0o755)
	var want []string
	for f := 0; f < 3; f++ {
		var b strings.Builder
		for i := 0; i < 500; i++ {
			l := fmt.Sprintf("w%d-%d\t%d", (i*7+f)%97, i, f)
			b.WriteString(l + "\n")
			want = append(want, l)
		}
		os.WriteFile(filepath.Join(in, fmt.Sprintf("f%d.txt", f)), []byte(b.String()), 0o644)
	}
	sort.Strings(want)
	outDir := filepath.Join(dir, "out")
	c.MustRun("mkdir", "/work")
	out, code := mrRun(t, c, "-input", "file::"+in, "-output", "file::"+outDir, "-work", "plasma::/work", "-map", "cat", "-partitions", "3")
	if code != 0 {
		t.Fatalf("mr run with local input and output: exit %d\n%s", code, out)
	}
	var got []string
	for p := 0; p < 3; p++ {
		b, err := os.ReadFile(filepath.Join(outDir, fmt.Sprintf("part-%05d", p)))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
		if !sort.StringsAreSorted(lines) {
			t.Fatalf("part %d not sorted", p)
		}
		got = append(got, lines...)
	}
	testkit.SameLines(t, got, want)
	if ls := strings.TrimSpace(c.MustRun("ls", "-a", "-1", "/work")); ls != "" && ls != ".\n.." {
		t.Fatalf("the work directory keeps %q", ls)
	}
	if out, code := mrRun(t, c, "-input", "file::"+in, "-output", "file::"+outDir, "-work", "/work", "-map", "cat"); code != 1 || !strings.Contains(out, "exists") {
		t.Fatalf("existing local output: exit %d, want 1 saying it exists\n%s", code, out)
	}
	if out, code := mrRun(t, c, "-input", "file::"+in, "-output", "/o", "-work", "file::"+dir, "-map", "cat"); code != 2 || !strings.Contains(out, "must be in PlasmaFS") {
		t.Fatalf("local work directory: exit %d, want 2\n%s", code, out)
	}
}

// TestMRConvertRoundTrip: 'plasma mr convert' turns text lines into
// .fixed<n> records, those into .var records (4-byte big-endian length,
// then the record) and back into text, byte for byte, across local and
// PlasmaFS files; a line of the wrong length for .fixed<n> fails naming
// its record and leaves no file.
func TestMRConvertRoundTrip(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	dir := t.TempDir()
	const n, size = 5000, 24
	r := rand.New(rand.NewPCG(1, 2))
	var text bytes.Buffer
	var recs [][]byte
	for i := 0; i < n; i++ {
		rec := make([]byte, size)
		for k := range rec {
			rec[k] = byte(' ' + r.IntN(95)) // printable, TABs aside: any byte but a newline would do
		}
		recs = append(recs, rec)
		text.Write(rec)
		text.WriteByte('\n')
	}
	src := filepath.Join(dir, "recs.txt")
	os.WriteFile(src, text.Bytes(), 0o644)
	c.MustRun("mr", "convert", "file::"+src, "plasma::/recs.fixed24")
	c.MustRun("mr", "convert", "/recs.fixed24", "/recs.var")
	c.MustRun("mr", "convert", "/recs.var", "file::"+filepath.Join(dir, "back.txt"))

	if got := c.MustRun("cat", "/recs.fixed24"); got != string(bytes.Join(recs, nil)) {
		t.Fatalf("/recs.fixed24: %d bytes, want the %d records of %d bytes back to back", len(got), n, size)
	}
	var v bytes.Buffer
	for _, rec := range recs {
		v.Write(binary.BigEndian.AppendUint32(nil, uint32(len(rec))))
		v.Write(rec)
	}
	if got := c.MustRun("cat", "/recs.var"); got != v.String() {
		t.Fatalf("/recs.var: %d bytes, want %d (length-prefixed records)", len(got), v.Len())
	}
	back, err := os.ReadFile(filepath.Join(dir, "back.txt"))
	if err != nil || !bytes.Equal(back, text.Bytes()) {
		t.Fatalf("text -> .fixed24 -> .var -> text: %d bytes (%v), want the %d of the original", len(back), err, text.Len())
	}

	bad := filepath.Join(dir, "bad.txt")
	os.WriteFile(bad, []byte("exactly-24-bytes-long-ok\nshort\n"), 0o644)
	if out, code := c.Run(nil, "mr", "convert", "file::"+bad, "/bad.fixed24"); code != 1 || !strings.Contains(out, "record 2") {
		t.Fatalf("a short line into .fixed24: exit %d, want 1 naming record 2\n%s", code, out)
	}
	if out, code := c.Run(nil, "ls", "/bad.fixed24"); code == 0 {
		t.Fatalf("a failed conversion left /bad.fixed24:\n%s", out)
	}
	if out, code := c.Run(nil, "mr", "convert", "/recs.var", "/x.fixed"); code != 2 {
		t.Fatalf(".fixed without a size: exit %d, want 2\n%s", code, out)
	}
}

// TestMRAutoInputFormat: with input_format "auto" each input file is read
// in the format its name names, as the original's auto_input_format did:
// text lines, .fixed8 records and .var records (made by 'mr convert') are
// counted as the records they hold.
func TestMRAutoInputFormat(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	dir := t.TempDir()
	write := func(name string, n int) {
		var b strings.Builder
		for i := 0; i < n; i++ {
			fmt.Fprintf(&b, "rec%05d\n", i) // 8 bytes and a newline
		}
		os.WriteFile(filepath.Join(dir, name), []byte(b.String()), 0o644)
	}
	write("a.txt", 10)
	write("b.txt", 20)
	write("c.txt", 30)
	c.MustRun("mkdir", "/in")
	c.MustRun("cp", "file::"+filepath.Join(dir, "a.txt"), "/in/a.txt")
	c.MustRun("mr", "convert", "file::"+filepath.Join(dir, "b.txt"), "/in/b.fixed8")
	c.MustRun("mr", "convert", "file::"+filepath.Join(dir, "c.txt"), "/in/c.var")
	job := writeJob(t, `input = "/in"`, `output = "/out"`, `work = "/work"`, `input_format = "auto"`, `map = "cat >/dev/null"`, `partitions = 1`)
	out, code := mrRun(t, c, job)
	if code != 0 {
		t.Fatalf("mr run: exit %d\n%s", code, out)
	}
	if v := testkit.ReportValue(t, out, "Map input records"); v != "60" {
		t.Fatalf("map input records %s, want 60 (10 lines, 20 .fixed8 and 30 .var records)\n%s", v, out)
	}
}
