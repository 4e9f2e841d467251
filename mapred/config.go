package mapred

import (
	"errors"
	"fmt"
	"os"
	"path"
	"strings"

	"github.com/BurntSushi/toml"
	"github.com/plasmafs/plasma/internal/mrexec"
	"github.com/plasmafs/plasma/internal/units"
)

// Job describes a streaming MapReduce job: its directories in PlasmaFS and
// the commands that map and reduce. The zero value of an optional field
// means its default (see Defaults).
type Job struct {
	Name   string // informational
	Input  string // PlasmaFS directory whose regular files are the input (text lines)
	Output string // PlasmaFS directory the output appears as; must not exist
	Work   string // PlasmaFS directory for intermediate files (created if missing)
	Log    string // PlasmaFS directory for the report, task logs and job status (created if missing; default DefaultLog)

	// Map and Reduce are shell commands (run with sh -c) reading records
	// on stdin and writing "key TAB value" lines on stdout. An empty Reduce
	// is the identity: the output is the sorted map output.
	Map    string
	Reduce string
	// Combine, optional, is a shell command run on each sorted run of a
	// map task, partition by partition, before it is written: it reads
	// "key TAB value" lines sorted by key and writes lines that replace
	// them (typically one per key, as the reducer would, so that less
	// goes to the shuffle). It must keep the keys it is given.
	Combine string
	// MapPartitions: the map command writes "partition TAB key TAB
	// value" lines, choosing each record's partition itself (a Go-API
	// job with a Partition function; see Job.Use).
	MapPartitions bool

	// InputFormat is how input files are cut into records (a record is
	// never split between two map tasks; the mapper gets whole records on
	// stdin, in the input's own format):
	//   "lines" (default): text lines ending in '\n';
	//   "fixed": records of RecordSize bytes each;
	//   "length-prefixed": each record a 4-byte big-endian length, then
	//   that many bytes. Such a file cannot be cut without reading it from
	//   its start, so each file is one map task;
	//   "auto": each file's format chosen by its name (FormatOfName: .var
	//   length-prefixed, .fixed<n> fixed of n bytes, other names lines).
	InputFormat string
	RecordSize  int // "fixed": bytes per record

	Partitions  int   // reduce tasks = output files (default 4)
	SplitSize   int64 // bytes of input per map task, rounded to whole blocks (default 64 MiB)
	SortBuffer  int64 // memory one task may use to sort and merge (default 64 MiB)
	MaxAttempts int   // attempts of one task before the job fails (default 3)
	Rep         int   // replication of intermediate files (default 1)
	OutputRep   int   // replication of output files (0: cluster default)

	// TaskServers are the addresses of 'plasma mr taskserver' processes;
	// none means the tasks run inside the job's process (LocalSlots
	// goroutines).
	TaskServers []string
	LocalSlots  int // default 2
	// KeepWork keeps the job's intermediate files in Work.
	KeepWork bool
	// ExtractMode is how a map output line gives its key and partition
	// (the original's extract_mode; see extract.go): "key_tab_value"
	// (default), "key_tab_partition_tab_value" or "key".
	ExtractMode string
}

// Defaults fills in the defaults of unset fields.
func (j *Job) Defaults() {
	if j.Name == "" {
		j.Name = "job"
	}
	if j.Log == "" {
		j.Log = DefaultLog
	}
	if j.Partitions == 0 {
		j.Partitions = 4
	}
	if j.InputFormat == "" {
		j.InputFormat = FormatLines
	}
	if j.SplitSize == 0 {
		j.SplitSize = 64 << 20
	}
	if j.SortBuffer == 0 {
		j.SortBuffer = 64 << 20
	}
	if j.MaxAttempts == 0 {
		j.MaxAttempts = 3
	}
	if j.Rep == 0 {
		j.Rep = 1
	}
	if j.LocalSlots == 0 {
		j.LocalSlots = 2
	}
}

// Validate checks a job after Defaults.
func (j *Job) Validate() error {
	for _, d := range []struct{ name, p string }{{"input", j.Input}, {"output", j.Output}, {"work", j.Work}, {"log", j.Log}} {
		if d.p == "" {
			return fmt.Errorf("%s directory missing", d.name)
		}
		local, p, err := jobTree(d.name, d.p)
		if err != nil {
			return err
		}
		if !local && !strings.HasPrefix(p, "/") {
			return fmt.Errorf("%s directory %q: not an absolute PlasmaFS path", d.name, d.p)
		}
	}
	if _, out, _ := jobTree("output", j.Output); path.Clean(out) == "/" {
		return errors.New("output directory cannot be /")
	}
	if j.Map == "" {
		return errors.New("map command missing")
	}
	if err := mrexec.ValidExtractMode(j.ExtractMode); err != nil {
		return err
	}
	switch j.InputFormat {
	case FormatLines, FormatLengthPrefixed, FormatAuto:
		if j.RecordSize != 0 {
			return fmt.Errorf("record_size applies to input_format \"fixed\" only")
		}
	case FormatFixed:
		if j.RecordSize < 1 || j.RecordSize > 1<<30 {
			return fmt.Errorf("record_size %d: input_format \"fixed\" needs 1..1G bytes per record", j.RecordSize)
		}
	default:
		return fmt.Errorf("input_format %q: must be %q, %q, %q or %q", j.InputFormat, FormatLines, FormatFixed, FormatLengthPrefixed, FormatAuto)
	}
	switch {
	case j.Partitions < 1 || j.Partitions > 100000:
		return fmt.Errorf("partitions %d: must be 1..100000", j.Partitions)
	case j.SplitSize < 1:
		return fmt.Errorf("split_size %d: must be positive", j.SplitSize)
	case j.SortBuffer < 16<<10:
		return fmt.Errorf("sort_buffer %d: must be at least 16K", j.SortBuffer)
	case j.MaxAttempts < 1 || j.MaxAttempts > 100:
		return fmt.Errorf("max_attempts %d: must be 1..100", j.MaxAttempts)
	case j.Rep < 1 || j.Rep > 16:
		return fmt.Errorf("rep %d: must be 1..16", j.Rep)
	case j.OutputRep < 0 || j.OutputRep > 16:
		return fmt.Errorf("output_rep %d: must be 0..16", j.OutputRep)
	case j.LocalSlots < 1 || j.LocalSlots > 1024:
		return fmt.Errorf("local_slots %d: must be 1..1024", j.LocalSlots)
	}
	return nil
}

// LoadJob reads a job file in TOML: top-level keys with strings,
// integers, sizes (an integer or a string such as "64M"), booleans and
// arrays of strings.
func LoadJob(file string) (Job, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return Job{}, err
	}
	j, err := ParseJob(string(b))
	if err != nil {
		return Job{}, fmt.Errorf("%s: %w", file, err)
	}
	return j, nil
}

// ParseJob parses a job file's text (see LoadJob). A key given twice
// (also under its two names, map and map_exec) is refused.
func ParseJob(text string) (Job, error) {
	var j Job
	var values map[string]any
	md, err := toml.Decode(text, &values)
	if err != nil {
		return j, err
	}
	given := map[any]string{} // field -> the key that set it
	for _, key := range md.Keys() {
		k := key.String()
		if len(key) != 1 {
			continue // a key inside a table; the table itself is refused below
		}
		field, err := j.set(k, values[k])
		if err != nil {
			return j, fmt.Errorf("%s: %w", k, err)
		}
		if other, ok := given[field]; ok {
			return j, fmt.Errorf("%s: %s already given (the two names mean the same)", k, other)
		}
		given[field] = k
	}
	return j, nil
}

// jobSize is a size in a job file: an integer or a string ParseSize
// takes.
func jobSize(v any) (int64, error) {
	switch v := v.(type) {
	case int64:
		if v < 0 {
			return 0, fmt.Errorf("%d: negative", v)
		}
		return v, nil
	case string:
		return units.ParseSize(v)
	}
	return 0, fmt.Errorf("%v: not a size (an integer or a string such as \"64M\")", v)
}

// set sets the field key k names to v and returns the field's address.
func (j *Job) set(k string, v any) (any, error) {
	str := map[string]*string{"name": &j.Name, "input": &j.Input, "output": &j.Output, "work": &j.Work, "log": &j.Log,
		"map": &j.Map, "reduce": &j.Reduce, "map_exec": &j.Map, "reduce_exec": &j.Reduce, "input_format": &j.InputFormat, "combine": &j.Combine, "combine_exec": &j.Combine,
		"input_dir": &j.Input, "output_dir": &j.Output, "work_dir": &j.Work, "log_dir": &j.Log, "extract_mode": &j.ExtractMode}
	ints := map[string]*int{"record_size": &j.RecordSize, "partitions": &j.Partitions, "max_attempts": &j.MaxAttempts, "rep": &j.Rep, "output_rep": &j.OutputRep, "local_slots": &j.LocalSlots}
	sizes := map[string]*int64{"split_size": &j.SplitSize, "sort_buffer": &j.SortBuffer, "bigblock_size": &j.SplitSize, "buffer_size": &j.SortBuffer}
	if p, ok := str[k]; ok {
		s, ok := v.(string)
		if !ok {
			return p, fmt.Errorf("%v: not a string", v)
		}
		*p = s
		return p, nil
	}
	if p, ok := ints[k]; ok {
		n, err := jobSize(v)
		if err != nil {
			return p, err
		}
		if n > 1<<30 {
			return p, fmt.Errorf("%d: too large", n)
		}
		*p = int(n)
		return p, nil
	}
	if p, ok := sizes[k]; ok {
		n, err := jobSize(v)
		*p = n
		return p, err
	}
	switch k {
	case "taskservers":
		vs, ok := v.([]any)
		if !ok {
			return &j.TaskServers, errors.New("not an array of strings")
		}
		j.TaskServers = nil
		for _, e := range vs {
			s, ok := e.(string)
			if !ok {
				return &j.TaskServers, errors.New("not an array of strings")
			}
			j.TaskServers = append(j.TaskServers, s)
		}
		return &j.TaskServers, nil
	case "keep_work":
		b, ok := v.(bool)
		if !ok {
			return &j.KeepWork, errors.New("not a boolean")
		}
		j.KeepWork = b
		return &j.KeepWork, nil
	}
	if _, ok := v.(map[string]any); ok {
		return nil, errors.New("tables are not supported (keys only)")
	}
	return nil, errors.New("unknown key")
}
