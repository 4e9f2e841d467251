package mrexec

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"

	"github.com/plasmafs/plasma/client"
)

// Task is one attempt of a map or reduce task, as the coordinator sends it
// to a worker.
type Task struct {
	Job     string
	Kind    string // "map" or "reduce"
	Index   int
	Attempt int
	Dir     string // the job's directory in the work directory
	Command string // sh -c command; empty for the identity reducer
	Combine string // map: the combiner's sh -c command, run on each sorted run's partitions (empty: none)
	// MapPartitions: the map command's lines start with their partition
	// number and a TAB (Job.MapPartitions).
	MapPartitions bool
	ExtractMode   string // how a map output line gives its partition (Job.ExtractMode)
	Partitions    int
	SortBuffer    int64
	Rep           int // replication of the file the task writes
	Blocksize     int64

	// Map: the input file's bytes [Start, End) (the task reads on to the
	// end of the line running over End and skips a partial first line).
	Input      string
	Start, End int64
	Format     string // input format (Job.InputFormat; "" means lines)
	RecordSize int    // "fixed"

	// Reduce: the map outputs; the task reads partition Index of each.
	Inputs []string

	// Credential is the job's delegated credential (PEM, with its key),
	// which a task server runs the task with; only over connections at
	// security level privacy.
	Credential []byte `json:",omitempty"`
	// The job's name and directories and its split size (bigblock size),
	// for the commands' PLASMAMR_* environment (streamenv.go).
	JobName                     string
	InputDir, OutputDir, LogDir string
	BigblockSize                int64
}

// Name is the task's name, e.g. map-00003.
func (t *Task) Name() string { return fmt.Sprintf("%s-%05d", t.Kind, t.Index) }

// AttemptName names one attempt, e.g. map-00003.a1.
func (t *Task) AttemptName() string { return fmt.Sprintf("%s.a%d", t.Name(), t.Attempt) }

// Counters count a job's records and bytes.
type Counters struct {
	MapInRecords, MapInBytes       int64
	MapOutRecords, MapOutBytes     int64
	Spills, MergePasses            int64
	CombineIn, CombineOut          int64 // records into and out of the combiner
	ReduceInRecords, ReduceInBytes int64
	ReduceOutRecords               int64
	ReduceOutBytes                 int64
}

// Add adds o to c.
func (c *Counters) Add(o Counters) {
	c.MapInRecords += o.MapInRecords
	c.MapInBytes += o.MapInBytes
	c.MapOutRecords += o.MapOutRecords
	c.MapOutBytes += o.MapOutBytes
	c.Spills += o.Spills
	c.CombineIn += o.CombineIn
	c.CombineOut += o.CombineOut
	c.MergePasses += o.MergePasses
	c.ReduceInRecords += o.ReduceInRecords
	c.ReduceInBytes += o.ReduceInBytes
	c.ReduceOutRecords += o.ReduceOutRecords
	c.ReduceOutBytes += o.ReduceOutBytes
}

// Result is what an attempt reports.
type Result struct {
	Output   string // the file it committed (success only)
	Error    string // why it failed; empty on success
	Stderr   string // the tail of the command's standard error
	Counters Counters
	Inputs   int // files (or pieces of files) read
	NonLocal int // of which mostly not on the worker's datanode
	Commits  int // namenode commits made
	Worker   string
}

// stderrLimit is how much of a command's standard error is kept.
const stderrLimit = 64 << 10

// tailBuffer keeps the last stderrLimit bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	b   []byte
	cut bool
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > stderrLimit {
		t.b = append(t.b[:0], t.b[len(t.b)-stderrLimit:]...)
		t.cut = true
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cut {
		return "[…]" + string(t.b)
	}
	return string(t.b)
}

// Worker identifies where a task runs.
type Worker struct {
	Name string // task server address, or "local"
	Node string // identity of the paired datanode ("" if none)
}

// Execute runs one task attempt with client c. It never panics on a task
// error: failures are in Result.Error.
func Execute(ctx context.Context, c *client.Client, w Worker, t Task) Result {
	return executeAs(ctx, c, w, t, nil)
}

// executeAs is Execute with the commands run as OS account u (nil: as
// this process), each attempt in a working directory of its own.
func executeAs(ctx context.Context, c *client.Client, w Worker, t Task, u *TaskUser) Result {
	e := &exec1{c: c, w: w, t: t, stderr: &tailBuffer{}}
	e.res.Worker = w.Name
	var acct *attemptAccount
	if u != nil {
		var err error
		if acct, err = u.attemptAccount(); err != nil {
			e.res.Error = err.Error()
			return e.res
		}
		defer acct.release()
		e.user = acct.TaskUser
	}
	err := e.makeLocalDir()
	switch {
	case err != nil:
	case t.Kind == "map":
		err = e.runMap(ctx)
	case t.Kind == "reduce":
		err = e.runReduce(ctx)
	default:
		err = fmt.Errorf("unknown task kind %q", t.Kind)
	}
	if acct != nil {
		acct.killAll() // what the commands left running, before their files are read
	}
	e.endLocalDir(ctx)
	e.res.Stderr = e.stderr.String()
	if err != nil {
		e.res.Error = err.Error()
		e.res.Output = ""
	}
	return e.res
}

type exec1 struct {
	c      *client.Client
	w      Worker
	t      Task
	res    Result
	stderr *tailBuffer
	user   *TaskUser // run commands as this account (nil: as this process)
	// local is the attempt's local directory (PLASMAMR_LOCAL_DIR) and
	// localLog the directory below it whose files go to the job's log
	// directory when the attempt ends (streamenv.go).
	local, localLog string
	localDir        *os.File // local, opened when it was made (localdir.go)
	// scratch is the transaction of spill and merge files: never
	// committed, so they cost no commit and vanish with it.
	scratch  *client.Txn
	nscratch int
}

func (e *exec1) scratchFile(ctx context.Context) (io.ReaderAt, io.Writer, func() error, error) {
	if e.scratch == nil {
		e.scratch = e.c.Begin()
	}
	e.nscratch++
	f, err := e.scratch.CreateFile(ctx, fmt.Sprintf("%s/tmp/%s.%d", e.t.Dir, e.t.AttemptName(), e.nscratch), client.CreateOptions{Rep: 1, Mode: 0o600})
	if err != nil {
		return nil, nil, nil, err
	}
	return f, f, func() error { return f.Flush(ctx) }, nil
}

func (e *exec1) endScratch(ctx context.Context) {
	if e.scratch != nil {
		e.scratch.Abort(context.WithoutCancel(ctx))
	}
}

func (e *exec1) env() []string {
	t := e.t
	env := os.Environ()
	if e.user != nil {
		env = e.user.environ(e.local)
	}
	env = append(env, e.originalEnv()...)
	env = append(env,
		"PLASMAMR_JOB_ID="+t.Job,
		"PLASMAMR_TASK="+t.Name(),
		"PLASMAMR_ATTEMPT="+strconv.Itoa(t.Attempt),
		"PLASMAMR_PARTITIONS="+strconv.Itoa(t.Partitions),
		"PLASMAMR_SORT_BUFFER="+strconv.FormatInt(t.SortBuffer, 10),
		"PLASMAMR_TASKSERVER="+e.w.Name,
		"PLASMAMR_WORK_DIR="+t.Dir)
	if t.Kind == "map" {
		env = append(env, "PLASMAMR_INPUT_FILE="+t.Input)
	} else {
		env = append(env, "PLASMAMR_PARTITION="+strconv.Itoa(t.Index))
	}
	return env
}

// runCombiner runs the job's combiner on one partition of a sorted run:
// the lines go to its stdin, sorted by key; its "key TAB value" lines
// replace them.
func (e *exec1) runCombiner(ctx context.Context, lines [][]byte) ([][]byte, error) {
	cmd := e.commandOf(ctx, e.t.Combine)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("combine command: %w", err)
	}
	fed := make(chan error, 1)
	go func() {
		bw := bufio.NewWriterSize(stdin, 64<<10)
		var err error
		for _, l := range lines {
			bw.Write(l)
			if err = bw.WriteByte('\n'); err != nil {
				break
			}
		}
		if err == nil {
			err = bw.Flush()
		}
		stdin.Close()
		if errors.Is(err, syscall.EPIPE) {
			err = nil
		}
		fed <- err
	}()
	var out [][]byte
	lr := lineReader{r: bufio.NewReaderSize(stdout, 64<<10)}
	var rerr error
	for {
		l, err := lr.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			rerr = err
			cmd.Cancel()
			io.Copy(io.Discard, stdout)
			break
		}
		out = append(out, bytes.Clone(l))
	}
	werr := cmd.Wait()
	ferr := <-fed
	switch {
	case werr != nil:
		return nil, exitError("combine command", werr)
	case rerr != nil:
		return nil, rerr
	case ferr != nil:
		return nil, ferr
	}
	e.res.Counters.CombineIn += int64(len(lines))
	e.res.Counters.CombineOut += int64(len(out))
	return out, nil
}

// command prepares the task's command in its own process group, killed
// with the group when ctx ends or the worker process dies.
func (e *exec1) command(ctx context.Context) *exec.Cmd { return e.commandOf(ctx, e.t.Command) }

func (e *exec1) commandOf(ctx context.Context, shell string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "sh", "-c", shell)
	cmd.Env = e.env()
	cmd.Stderr = e.stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if e.user != nil {
		cmd.SysProcAttr.Credential = e.user.credential()
		cmd.Dir = e.local
	}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	return cmd
}

func exitError(what string, err error) error {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return fmt.Errorf("%s: %v", what, ee.ProcessState)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// localBlocks counts the blocks of [off, off+n) of file ino and how many
// of them have a replica on node.
func localBlocks(ctx context.Context, tx *client.Txn, ino uint64, off, n, bs int64, node string) (local, total int64, err error) {
	if n <= 0 || bs <= 0 {
		return 0, 0, nil
	}
	xs, err := tx.Blocks(ctx, ino)
	if err != nil {
		return 0, 0, err
	}
	first, last := uint64(off/bs), uint64((off+n-1)/bs)
	for _, x := range xs {
		lo, hi := max(x.Index, first), min(x.Index+uint64(x.Count)-1, last)
		if lo > hi || x.Index+uint64(x.Count) == 0 {
			continue
		}
		total += int64(hi - lo + 1)
		for _, r := range x.Replicas {
			if r.Datanode == node {
				local += int64(hi - lo + 1)
				break
			}
		}
	}
	return local, total, nil
}

// noteInput counts an input of n bytes at off of file ino for the locality
// figures.
func (e *exec1) noteInput(ctx context.Context, tx *client.Txn, ino uint64, off, n int64) error {
	e.res.Inputs++
	if e.w.Node == "" || n == 0 {
		return nil
	}
	local, total, err := localBlocks(ctx, tx, ino, off, n, e.t.Blocksize, e.w.Node)
	if err != nil {
		return err
	}
	if 2*local < total {
		e.res.NonLocal++
	}
	return nil
}

// feedSplit writes the records of the task's split to w: the records
// starting in [Start, End), whole.
func (e *exec1) feedSplit(in io.ReaderAt, size int64, w io.Writer, readBuf int) error {
	switch e.t.Format {
	case FormatFixed:
		return e.feedFixed(in, size, w, readBuf)
	case FormatLengthPrefixed:
		return e.feedLengthPrefixed(in, size, w, readBuf)
	}
	return e.feedLines(in, size, w, readBuf)
}

// feedLines feeds whole lines starting in [Start, End), each ending in
// '\n'.
func (e *exec1) feedLines(in io.ReaderAt, size int64, w io.Writer, readBuf int) error {
	t := e.t
	end := min(t.End, size)
	pos := t.Start
	if pos >= end {
		return nil
	}
	from := pos
	if pos > 0 {
		from = pos - 1
	}
	br := bufio.NewReaderSize(io.NewSectionReader(in, from, size-from), readBuf)
	if pos > 0 {
		// The line holding byte Start-1 belongs to the previous split:
		// skip through its '\n'.
		pos = from
		for {
			b, err := br.ReadSlice('\n')
			pos += int64(len(b))
			if err == nil {
				break
			}
			if err == io.EOF {
				return nil
			}
			if err != bufio.ErrBufferFull {
				return err
			}
		}
	}
	// Lines starting before end are ours, however far they run.
	atStart := true
	for {
		if atStart && pos >= end {
			return nil
		}
		b, err := br.ReadSlice('\n')
		if len(b) > 0 {
			if atStart {
				e.res.Counters.MapInRecords++
			}
			if _, werr := w.Write(b); werr != nil {
				return werr
			}
			pos += int64(len(b))
			e.res.Counters.MapInBytes += int64(len(b))
		}
		switch err {
		case nil:
			atStart = true
		case bufio.ErrBufferFull:
			atStart = false
		case io.EOF:
			if len(b) > 0 && b[len(b)-1] != '\n' {
				if _, werr := w.Write([]byte{'\n'}); werr != nil {
					return werr
				}
			}
			return nil
		default:
			return err
		}
	}
}

func (e *exec1) runMap(ctx context.Context) error {
	t := e.t
	defer e.endScratch(ctx)
	rtx := e.c.Begin()
	defer rtx.Abort(context.WithoutCancel(ctx))
	in, err := rtx.Open(ctx, t.Input)
	if err != nil {
		return err
	}
	size := in.Size()
	if err := e.noteInput(ctx, rtx, in.Ino(), t.Start, min(t.End, size)-t.Start); err != nil {
		return err
	}
	readBuf, fanIn := mergeBudget(t.SortBuffer)

	cmd := e.command(ctx)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("map command: %w", err)
	}
	feedErr := make(chan error, 1)
	go func() {
		bw := bufio.NewWriterSize(stdin, 64<<10)
		err := e.feedSplit(in, size, bw, readBuf)
		if err == nil {
			err = bw.Flush()
		}
		stdin.Close()
		if errors.Is(err, syscall.EPIPE) {
			err = nil // the command stopped reading: its exit status tells
		}
		feedErr <- err
	}()

	buf := &sortBuf{limit: t.SortBuffer}
	if t.Combine != "" {
		buf.combine = func(lines [][]byte) ([][]byte, error) { return e.runCombiner(ctx, lines) }
	}
	var runs []run
	spill := func() error {
		ra, wr, done, err := e.scratchFile(ctx)
		if err != nil {
			return err
		}
		w := newCountWriter(wr, readBuf)
		offs, err := buf.writeSorted(w, t.Partitions)
		if err == nil {
			err = w.Flush()
		}
		if err == nil {
			err = done()
		}
		runs = append(runs, run{ra: ra, offs: offs})
		e.res.Counters.Spills++
		return err
	}
	lr := lineReader{r: bufio.NewReaderSize(stdout, 64<<10)}
	var outErr error
	for {
		line, err := lr.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			outErr = err
			break
		}
		e.res.Counters.MapOutRecords++
		e.res.Counters.MapOutBytes += int64(len(line)) + 1
		var p int
		if t.MapPartitions {
			if line, p, outErr = cutPartition(line, t.Partitions); outErr != nil {
				break
			}
		} else if p, outErr = partitionOf(t.ExtractMode, line, t.Partitions); outErr != nil {
			break
		}
		if !buf.add(p, line) {
			if outErr = spill(); outErr != nil {
				break
			}
			buf.add(p, line)
		}
	}
	if outErr != nil {
		cmd.Cancel()
		io.Copy(io.Discard, stdout)
	}
	werr := cmd.Wait()
	ferr := <-feedErr
	switch {
	case outErr != nil:
		return outErr // the command was killed for it
	case werr != nil:
		return exitError("map command", werr)
	case ferr != nil:
		return fmt.Errorf("reading %s: %w", t.Input, ferr)
	}

	wtx := e.c.Begin()
	defer wtx.Abort(context.WithoutCancel(ctx))
	name := t.Dir + "/" + t.AttemptName()
	out, err := wtx.CreateFile(ctx, name, client.CreateOptions{Rep: t.Rep, Mode: 0o600})
	if err != nil {
		return err
	}
	w := newCountWriter(out, 256<<10)
	var offs []int64
	if len(runs) == 0 {
		offs, err = buf.writeSorted(w, t.Partitions)
	} else {
		if len(buf.recs) > 0 {
			if err := spill(); err != nil {
				return err
			}
		}
		buf.release()
		var passes int
		runs, passes, err = narrow(runs, t.Partitions, readBuf, fanIn, func() (io.ReaderAt, io.Writer, func() error, error) { return e.scratchFile(ctx) })
		e.res.Counters.MergePasses += int64(passes)
		if err != nil {
			return err
		}
		offs, err = mergeRuns(runs, t.Partitions, readBuf, w)
	}
	if err != nil {
		return err
	}
	if err := writeIndex(w, offs); err != nil {
		return err
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	if err := wtx.Commit(ctx); err != nil {
		return err
	}
	e.res.Commits++
	e.res.Output = name
	return nil
}

func (e *exec1) runReduce(ctx context.Context) error {
	t := e.t
	defer e.endScratch(ctx)
	rtx := e.c.Begin()
	defer rtx.Abort(context.WithoutCancel(ctx))
	readBuf, fanIn := mergeBudget(t.SortBuffer)
	var runs []run
	for _, name := range t.Inputs {
		f, err := rtx.Open(ctx, name)
		if err != nil {
			return err
		}
		offs, err := readIndex(f, f.Size())
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if len(offs)-1 != t.Partitions {
			return fmt.Errorf("%s: %d partitions, want %d", name, len(offs)-1, t.Partitions)
		}
		lo, hi := offs[t.Index], offs[t.Index+1]
		if err := e.noteInput(ctx, rtx, f.Ino(), lo, hi-lo); err != nil {
			return err
		}
		e.res.Counters.ReduceInBytes += hi - lo
		if hi > lo {
			runs = append(runs, run{ra: f, offs: []int64{lo, hi}})
		}
	}
	runs, passes, err := narrow(runs, 1, readBuf, fanIn, func() (io.ReaderAt, io.Writer, func() error, error) { return e.scratchFile(ctx) })
	e.res.Counters.MergePasses += int64(passes)
	if err != nil {
		return err
	}

	wtx := e.c.Begin()
	defer wtx.Abort(context.WithoutCancel(ctx))
	name := t.Dir + "/" + t.AttemptName()
	out, err := wtx.CreateFile(ctx, name, client.CreateOptions{Rep: t.Rep, Mode: 0o644})
	if err != nil {
		return err
	}
	w := newCountWriter(out, 256<<10)
	feed := func(dst *countWriter) error {
		return mergePart(runs, 0, readBuf, func(line []byte) error {
			e.res.Counters.ReduceInRecords++
			dst.Write(line)
			return dst.WriteByte('\n')
		})
	}
	if t.Command == "" {
		if err := feed(w); err != nil {
			return err
		}
		e.res.Counters.ReduceOutRecords = e.res.Counters.ReduceInRecords
	} else {
		cmd := e.command(ctx)
		stdin, err := cmd.StdinPipe()
		if err != nil {
			return err
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return err
		}
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("reduce command: %w", err)
		}
		feedErr := make(chan error, 1)
		go func() {
			in := newCountWriter(stdin, 64<<10)
			err := feed(in)
			if err == nil {
				err = in.Flush()
			}
			stdin.Close()
			if errors.Is(err, syscall.EPIPE) {
				err = nil
			}
			feedErr <- err
		}()
		br := bufio.NewReaderSize(stdout, 64<<10)
		var outErr error
		for {
			b, err := br.ReadSlice('\n')
			if len(b) > 0 {
				if b[len(b)-1] == '\n' {
					e.res.Counters.ReduceOutRecords++
				}
				w.Write(b)
			}
			if err == io.EOF {
				if len(b) > 0 && b[len(b)-1] != '\n' {
					e.res.Counters.ReduceOutRecords++
					w.WriteByte('\n')
				}
				break
			}
			if err != nil && err != bufio.ErrBufferFull {
				outErr = err
				break
			}
			if w.err != nil {
				outErr = w.err
				break
			}
		}
		if outErr != nil {
			cmd.Cancel()
			io.Copy(io.Discard, stdout)
		}
		werr := cmd.Wait()
		ferr := <-feedErr
		switch {
		case werr != nil:
			return exitError("reduce command", werr)
		case ferr != nil:
			return fmt.Errorf("reading map outputs: %w", ferr)
		case outErr != nil:
			return outErr
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	e.res.Counters.ReduceOutBytes = w.n
	if err := out.Close(); err != nil {
		return err
	}
	if err := wtx.Commit(ctx); err != nil {
		return err
	}
	e.res.Commits++
	e.res.Output = name
	return nil
}
