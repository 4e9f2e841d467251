package benchcmd

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/cli"
	"github.com/plasmafs/plasma/internal/mrexec"
	"github.com/plasmafs/plasma/mapred"
)

// plasma bench mr: a streaming word count over generated text, beside the
// same pipeline run locally and a one-thread awk word count, in the same
// run on the same data.
func cmdBenchMR(ctx context.Context, args []string) error {
	f := cli.NewFlags(prog, "mr", "[-size BYTES] [-slots N | -taskserver ADDR...] [options]",
		`Word count of generated text (skewed word frequencies) as a streaming MapReduce job
(mapper: awk printing "word TAB 1"; reducer: cut -f1 | uniq -c), beside two references run
on a local copy of the same text: the same pipeline as one local shell pipeline
(awk | LC_ALL=C sort | uniq -c) and a one-thread awk hash count. Checks that the job's output
equals the pipeline's and prints the times, the ratios and the job report. With -go-job EXE
the same word count also runs as a Go-API job (an executable like tests/mr/testdata/gowc, given
-input, -output and -partitions), and with PySpark installed (pip install pyspark) a PySpark
local[2] word count of the local copy runs as a third reference; both outputs are checked too.`, true)
	var size int64 = 200 << 20
	f.SizeRange(&size, "size", 1<<20, 1<<40, "bytes of text")
	var split int64 = 32 << 20
	f.SizeRange(&split, "split-size", 64<<10, 1<<40, "input bytes per map task")
	var sortBuf int64 = 64 << 20
	f.SizeRange(&sortBuf, "sort-buffer", 64<<10, 1<<40, "memory per task for sorting")
	slots := f.IntRange("slots", runtime.NumCPU(), 1, 1024, "in-process task slots (without -taskserver)")
	parts := f.IntRange("partitions", runtime.NumCPU(), 1, 10000, "reduce tasks")
	var servers cli.MultiFlag
	f.Var(&servers, "taskserver", "task server `host:port` (repeatable)")
	tokenFile := f.String("token-file", os.Getenv("PLASMAMR_TOKEN_FILE"), "task servers' token `file`")
	localDir := f.String("localdir", os.TempDir(), "directory for the local copy")
	dir := f.String("dir", "/bench-mr", "PlasmaFS directory for the benchmark (removed afterwards)")
	sortMode := f.Bool("sort", false, "instead: a TeraSort-style sort of 100-byte records (-size bytes) as an identity job with one\npartition, beside LC_ALL=C sort --parallel=2 of the same records; the outputs must be equal")
	goJob := f.String("go-job", "", "a Go-API word count `executable` to run as well (e.g. built from tests/mr/testdata/gowc)")
	if err := f.Parse(args); err != nil {
		return err
	}
	c, err := f.Connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	runners, err := dialRunners(ctx, c, servers, *tokenFile)
	if err != nil {
		return err
	}
	if *sortMode {
		return benchSort(ctx, c, size, *dir, *localDir, split, sortBuf, *slots, runners)
	}
	local := filepath.Join(*localDir, fmt.Sprintf("plasma-bench-mr-%d.txt", os.Getpid()))
	defer os.Remove(local)
	if err := genText(local, size); err != nil {
		return err
	}
	if _, err := c.Lookup(ctx, *dir); err == nil {
		return fmt.Errorf("%s exists; remove it or pick another -dir", *dir)
	}
	defer removeBenchDir(context.WithoutCancel(ctx), c, *dir)
	putTime, err := putText(ctx, c, local, *dir+"/in/text")
	if err != nil {
		return err
	}
	// References first (they warm the local copy's pages, which the job
	// does not read).
	refs, err := wordCountReferences(ctx, local)
	if err != nil {
		return err
	}
	j := mapred.Job{Name: "bench-wordcount", Input: *dir + "/in", Output: *dir + "/out", Work: *dir + "/work", Log: *dir + "/log",
		Map: `awk '{for (i = 1; i <= NF; i++) print $i "\t1"}'`, Reduce: `cut -f1 | uniq -c`,
		Partitions: *parts, SplitSize: split, SortBuffer: sortBuf, LocalSlots: *slots}
	rep, err := mapred.Run(ctx, c, j, mapred.Options{Runners: runners})
	if err != nil {
		if rep != nil {
			fmt.Fprint(stdout, rep.Text())
		}
		return err
	}
	got, err := readParts(ctx, c, j.Output, *parts)
	if err != nil {
		return err
	}
	if err := sameLines(got, refs.want); err != nil {
		return err
	}
	where := fmt.Sprintf("%d local slots", *slots)
	if len(runners) > 0 {
		where = fmt.Sprintf("%d task servers", len(runners))
	}
	line := func(name string, d time.Duration) {
		fmt.Fprintf(stdout, "%-44s %9.2f s %8.1f MB/s\n", name, d.Seconds(), float64(size)/1e6/d.Seconds())
	}
	fmt.Fprintf(stdout, "word count of %s of generated text (%d CPUs); job output equals the local pipeline's\n", cli.Human(uint64(size)), runtime.NumCPU())
	line("plasma put (not part of the job)", putTime)
	line("local awk | LC_ALL=C sort | uniq -c", refs.pipe)
	line("local awk hash count, one thread", refs.awk)
	line("plasma mr, streaming, "+where, rep.Wallclock)
	fmt.Fprintf(stdout, "ratio job / local pipeline: %.2f\nratio job / one-thread awk: %.2f\n", rep.Wallclock.Seconds()/refs.pipe.Seconds(), rep.Wallclock.Seconds()/refs.awk.Seconds())
	if *goJob != "" {
		d, err := runGoJob(ctx, c, *goJob, *dir, *parts, refs.want)
		if err != nil {
			return err
		}
		line("plasma mr, Go-API job (combiner), "+where, d)
		fmt.Fprintf(stdout, "ratio Go job / one-thread awk: %.2f (goal ≤ 1.5)\n", d.Seconds()/refs.awk.Seconds())
	}
	if d, err := pysparkCount(ctx, local, len(refs.want)); err != nil {
		fmt.Fprintf(stdout, "PySpark local[2] reference: %v\n", err)
	} else {
		line("PySpark local[2] word count (local copy)", d)
		fmt.Fprintf(stdout, "ratio streaming job / PySpark: %.2f\n", rep.Wallclock.Seconds()/d.Seconds())
	}
	fmt.Fprintf(stdout, "namenode commits: %d by the job, %.2f per second, %.3f per core-second\n\n", rep.JobCommits,
		float64(rep.JobCommits)/rep.Wallclock.Seconds(), float64(rep.JobCommits)/rep.Wallclock.Seconds()/float64(runtime.NumCPU()))
	fmt.Fprint(stdout, rep.Text())
	return nil
}

// dialRunners connects to the task servers (none: the job runs in this
// process).
func dialRunners(ctx context.Context, c *client.Client, servers []string, tokenFile string) ([]mrexec.Runner, error) {
	token, err := cli.ReadToken(tokenFile)
	if err != nil {
		return nil, err
	}
	var runners []mrexec.Runner
	for _, a := range servers {
		r, err := mrexec.Dial(ctx, a, c, token)
		if err != nil {
			return nil, err
		}
		runners = append(runners, r)
	}
	return runners, nil
}

// putText copies the local file into PlasmaFS file to (one replica, its
// directory created) in one transaction and returns how long it took.
// Both benchmarks put their input with it.
func putText(ctx context.Context, c *client.Client, local, to string) (time.Duration, error) {
	start := time.Now()
	err := c.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
		if _, err := tx.MkdirAll(ctx, path.Dir(to), 0o755); err != nil {
			return err
		}
		dst, err := tx.CreateFile(ctx, to, client.CreateOptions{Rep: 1})
		if err != nil {
			return err
		}
		src, err := os.Open(local)
		if err != nil {
			return err
		}
		defer src.Close()
		if _, err := io.Copy(dst, bufio.NewReaderSize(src, 1<<20)); err != nil {
			return err
		}
		return dst.Close()
	})
	return time.Since(start), err
}

// wordCounts are the local references of the word count: the sorted
// lines the job must produce, and the times of the pipeline and of awk.
type wordCounts struct {
	want      []string
	pipe, awk time.Duration
}

// wordCountReferences counts the words of the local file with a shell
// pipeline (awk | sort | uniq -c, whose output the job's must equal) and
// with one awk process.
func wordCountReferences(ctx context.Context, local string) (wordCounts, error) {
	var r wordCounts
	start := time.Now()
	out, err := exec.CommandContext(ctx, "sh", "-c", `awk '{for (i = 1; i <= NF; i++) print $i}' "$1" | LC_ALL=C sort | uniq -c`, "sh", local).Output()
	if err != nil {
		return r, fmt.Errorf("reference pipeline: %w", err)
	}
	r.pipe = time.Since(start)
	start = time.Now()
	if _, err := exec.CommandContext(ctx, "sh", "-c", `awk '{for (i = 1; i <= NF; i++) n[$i]++} END {for (w in n) print n[w], w}' "$1" >/dev/null`, "sh", local).Output(); err != nil {
		return r, fmt.Errorf("reference awk: %w", err)
	}
	r.awk = time.Since(start)
	r.want = strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	sort.Strings(r.want)
	return r, nil
}

// sameLines checks the job's output lines against the pipeline's.
func sameLines(got, want []string) error {
	if len(got) != len(want) {
		return fmt.Errorf("job output has %d lines, the local pipeline %d", len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			return fmt.Errorf("job output differs from the local pipeline: %q vs %q", got[i], want[i])
		}
	}
	return nil
}

// benchSort sorts size bytes of 100-byte records (99 random letters and a
// newline, as the original's sort benchmark used 100-byte lines) with an
// identity job of one partition, and the same local copy with GNU sort.
func benchSort(ctx context.Context, c *client.Client, size int64, dir, localDir string, split, sortBuf int64, slots int, runners []mrexec.Runner) error {
	local := filepath.Join(localDir, fmt.Sprintf("plasma-bench-sort-%d", os.Getpid()))
	defer os.Remove(local)
	defer os.Remove(local + ".sorted")
	n := size / 100
	r := rand.New(rand.NewPCG(uint64(size), 100))
	if err := func() error {
		out, err := os.Create(local)
		if err != nil {
			return err
		}
		defer out.Close()
		w := bufio.NewWriterSize(out, 1<<20)
		rec := make([]byte, 100)
		rec[99] = '\n'
		for i := int64(0); i < n; i++ {
			for k := 0; k < 99; k++ {
				rec[k] = byte('a' + r.IntN(26))
			}
			w.Write(rec)
		}
		return w.Flush()
	}(); err != nil {
		return err
	}
	if _, err := c.Lookup(ctx, dir); err == nil {
		return fmt.Errorf("%s exists; remove it or pick another -dir", dir)
	}
	defer removeBenchDir(context.WithoutCancel(ctx), c, dir)
	if _, err := putText(ctx, c, local, dir+"/in/records"); err != nil {
		return err
	}
	sortStart := time.Now()
	cmd := exec.CommandContext(ctx, "sort", "--parallel=2", "-S", "25%", "-o", local+".sorted", local)
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("reference sort: %v: %s", err, out)
	}
	sortTime := time.Since(sortStart)
	j := mapred.Job{Name: "bench-sort", Input: dir + "/in", Output: dir + "/out", Work: dir + "/work", Log: dir + "/log",
		Map: "cat", InputFormat: mapred.FormatFixed, RecordSize: 100, Partitions: 1, SplitSize: split, SortBuffer: sortBuf, LocalSlots: slots}
	rep, err := mapred.Run(ctx, c, j, mapred.Options{Runners: runners})
	if err != nil {
		if rep != nil {
			fmt.Fprint(stdout, rep.Text())
		}
		return err
	}
	// The job's one output file equals sort's output, byte for byte.
	want, err := fileSHA(local + ".sorted")
	if err != nil {
		return err
	}
	tx := c.Begin()
	defer tx.Abort(ctx)
	fl, err := tx.Open(ctx, dir+"/out/part-00000")
	if err != nil {
		return err
	}
	h := sha256.New()
	if _, err := fl.WriteTo(h); err != nil {
		return err
	}
	if !bytes.Equal(h.Sum(nil), want) {
		return errors.New("the job's sorted output differs from sort's")
	}
	mb := float64(n*100) / 1e6
	cores := float64(runtime.NumCPU())
	fmt.Fprintf(stdout, "sort of %d 100-byte records (%.0f MB); the job's output equals sort's byte for byte\n", n, mb)
	fmt.Fprintf(stdout, "%-44s %9.2f s %8.1f MB/s %8.1f MB/s per core\n", "LC_ALL=C sort --parallel=2 (local copy)", sortTime.Seconds(), mb/sortTime.Seconds(), mb/sortTime.Seconds()/cores)
	fmt.Fprintf(stdout, "%-44s %9.2f s %8.1f MB/s %8.1f MB/s per core (goal ≥ 20)\n", "plasma mr, identity job, 1 partition", rep.Wallclock.Seconds(), mb/rep.Wallclock.Seconds(), mb/rep.Wallclock.Seconds()/cores)
	fmt.Fprintf(stdout, "ratio job / sort (time): %.2f\n\n", rep.Wallclock.Seconds()/sortTime.Seconds())
	fmt.Fprint(stdout, rep.Text())
	return nil
}

func fileSHA(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return nil, err
	}
	return h.Sum(nil), nil
}

// runGoJob runs a Go-API word count executable on dir/in (its output in
// dir/goout, "word TAB count" lines) and checks it against the local
// pipeline's "count word" lines.
func runGoJob(ctx context.Context, c *client.Client, exe, dir string, parts int, want []string) (time.Duration, error) {
	abs, err := filepath.Abs(exe)
	if err != nil {
		return 0, err
	}
	start := time.Now()
	cmd := exec.CommandContext(ctx, abs, "-input", dir+"/in", "-output", dir+"/goout", "-work", dir+"/gowork", "-log", dir+"/golog", "-partitions", fmt.Sprint(parts))
	if out, err := cmd.CombinedOutput(); err != nil {
		return 0, fmt.Errorf("the Go job %s: %v\n%s", exe, err, out)
	}
	d := time.Since(start)
	got, err := readParts(ctx, c, dir+"/goout", parts)
	if err != nil {
		return 0, err
	}
	for i, l := range got { // "word TAB n" to uniq -c's "n word"
		w, n, _ := strings.Cut(l, "\t")
		got[i] = fmt.Sprintf("%7s %s", n, w)
	}
	sort.Strings(got)
	norm := make([]string, len(want))
	for i, l := range want {
		f := strings.Fields(l)
		norm[i] = fmt.Sprintf("%7s %s", f[0], strings.Join(f[1:], " "))
	}
	sort.Strings(norm)
	if strings.Join(got, "\n") != strings.Join(norm, "\n") {
		return 0, fmt.Errorf("the Go job's output (%d words) differs from the local pipeline's (%d)", len(got), len(norm))
	}
	return d, nil
}

// pysparkCount runs a PySpark local[2] word count of path, start-up
// included, and checks it found words distinct words.
func pysparkCount(ctx context.Context, path string, words int) (time.Duration, error) {
	if exec.CommandContext(ctx, "python3", "-c", "import pyspark").Run() != nil {
		return 0, errors.New("not run: PySpark is not installed (pip install pyspark; it needs Java)")
	}
	script := `import sys
from pyspark.sql import SparkSession
s = SparkSession.builder.master("local[2]").appName("wc").config("spark.ui.enabled", "false").getOrCreate()
s.sparkContext.setLogLevel("ERROR")
n = s.sparkContext.textFile(sys.argv[1]).flatMap(lambda l: l.split()).map(lambda w: (w, 1)).reduceByKey(lambda a, b: a + b).count()
print(n)
s.stop()`
	start := time.Now()
	out, err := exec.CommandContext(ctx, "python3", "-c", script, path).Output()
	d := time.Since(start)
	if err != nil {
		return 0, fmt.Errorf("the PySpark word count: %v", err)
	}
	if got := strings.TrimSpace(string(out)); got != fmt.Sprint(words) {
		return 0, fmt.Errorf("the PySpark word count found %s distinct words, the pipeline %d", got, words)
	}
	return d, nil
}

// genText writes size bytes of lines of words with Zipf-distributed
// frequencies.
func genText(path string, size int64) error {
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(out, 1<<20)
	r := rand.New(rand.NewPCG(12, 34))
	z := rand.NewZipf(r, 1.1, 1, 200000)
	var n int64
	var line bytes.Buffer
	for n < size {
		line.Reset()
		for k := 1 + r.IntN(15); k > 0; k-- {
			if line.Len() > 0 {
				line.WriteByte(' ')
			}
			fmt.Fprintf(&line, "w%x", z.Uint64())
		}
		line.WriteByte('\n')
		if n+int64(line.Len()) > size {
			break
		}
		w.Write(line.Bytes())
		n += int64(line.Len())
	}
	if err := w.Flush(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// readParts reads the part files of a job's output and returns their
// lines, sorted.
func readParts(ctx context.Context, c *client.Client, dir string, parts int) ([]string, error) {
	tx := c.Begin()
	defer tx.Abort(ctx)
	var lines []string
	for p := 0; p < parts; p++ {
		fl, err := tx.Open(ctx, fmt.Sprintf("%s/part-%05d", dir, p))
		if err != nil {
			return nil, err
		}
		var b bytes.Buffer
		if _, err := fl.WriteTo(&b); err != nil {
			return nil, err
		}
		if s := strings.TrimSuffix(b.String(), "\n"); s != "" {
			lines = append(lines, strings.Split(s, "\n")...)
		}
	}
	sort.Strings(lines)
	return lines, nil
}

func removeBenchDir(ctx context.Context, c *client.Client, dir string) {
	c.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
		var rm func(string) error
		rm = func(d string) error {
			ents, err := tx.ReadDir(ctx, d)
			if err != nil {
				return err
			}
			for _, e := range ents {
				p := d + "/" + e.Name
				if e.Type == client.TypeDir {
					if err := rm(p); err != nil {
						return err
					}
				} else if err := tx.Unlink(ctx, p); err != nil {
					return err
				}
			}
			return tx.Rmdir(ctx, d)
		}
		return rm(dir)
	})
}
