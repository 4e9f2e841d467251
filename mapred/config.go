package mapred

import (
	"errors"
	"fmt"
	"os"
	"path"
	"strconv"
	"strings"
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
	if err := validExtractMode(j.ExtractMode); err != nil {
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

// LoadJob reads a job file in TOML (the flat subset: key = value lines,
// with strings, integers, sizes such as "64M", booleans and arrays of
// strings; # comments).
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

// ParseJob parses a job file's text (see LoadJob).
func ParseJob(text string) (Job, error) {
	var j Job
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		line := strings.TrimSpace(stripComment(lines[i]))
		if line == "" {
			continue
		}
		lineNo := i + 1
		if strings.HasPrefix(line, "[") {
			return j, fmt.Errorf("line %d: tables are not supported (keys only)", lineNo)
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return j, fmt.Errorf("line %d: expected key = value", lineNo)
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		// Arrays may span lines.
		if strings.HasPrefix(v, "[") {
			for !strings.HasSuffix(v, "]") && i+1 < len(lines) {
				i++
				v += " " + strings.TrimSpace(stripComment(lines[i]))
			}
		}
		if err := j.set(k, v); err != nil {
			return j, fmt.Errorf("line %d: %s: %w", lineNo, k, err)
		}
	}
	return j, nil
}

// stripComment removes a # comment outside quotes.
func stripComment(s string) string {
	var q byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case q != 0 && c == '\\' && q == '"':
			i++
		case q != 0 && c == q:
			q = 0
		case q == 0 && (c == '"' || c == '\''):
			q = c
		case q == 0 && c == '#':
			return s[:i]
		}
	}
	return s
}

func parseString(v string) (string, error) {
	switch {
	case len(v) >= 6 && strings.HasPrefix(v, `'''`) && strings.HasSuffix(v, `'''`):
		return v[3 : len(v)-3], nil
	case len(v) >= 2 && v[0] == '\'' && v[len(v)-1] == '\'':
		return v[1 : len(v)-1], nil
	case len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"':
		return strconv.Unquote(v)
	}
	return "", fmt.Errorf("%s: not a string", v)
}

func parseInt(v string) (int64, error) {
	if s, err := parseString(v); err == nil {
		return ParseSize(s)
	}
	return ParseSize(strings.ReplaceAll(v, "_", ""))
}

// ParseSize parses a byte count: 65536, 64K, 1M, 4G, 1T.
func ParseSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	mul := int64(1)
	if n := len(s); n > 0 {
		switch s[n-1] {
		case 'k', 'K':
			mul = 1 << 10
		case 'm', 'M':
			mul = 1 << 20
		case 'g', 'G':
			mul = 1 << 30
		case 't', 'T':
			mul = 1 << 40
		}
		if mul != 1 {
			s = s[:n-1]
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mul {
		return 0, fmt.Errorf("%q: not a size", s)
	}
	return n * mul, nil
}

func parseStrings(v string) ([]string, error) {
	if !strings.HasPrefix(v, "[") || !strings.HasSuffix(v, "]") {
		return nil, errors.New("not an array of strings")
	}
	in := strings.TrimSpace(v[1 : len(v)-1])
	var out []string
	for in != "" {
		var end int
		switch in[0] {
		case '"':
			end = 1
			for end < len(in) && in[end] != '"' {
				if in[end] == '\\' {
					end++
				}
				end++
			}
		case '\'':
			end = 1 + strings.IndexByte(in[1:], '\'')
			if end == 0 {
				end = len(in)
			}
		default:
			return nil, errors.New("not an array of strings")
		}
		if end >= len(in) {
			return nil, errors.New("unterminated string")
		}
		s, err := parseString(in[:end+1])
		if err != nil {
			return nil, err
		}
		out = append(out, s)
		in = strings.TrimSpace(in[end+1:])
		in = strings.TrimSpace(strings.TrimPrefix(in, ","))
	}
	return out, nil
}

func (j *Job) set(k, v string) error {
	str := map[string]*string{"name": &j.Name, "input": &j.Input, "output": &j.Output, "work": &j.Work, "log": &j.Log,
		"map": &j.Map, "reduce": &j.Reduce, "map_exec": &j.Map, "reduce_exec": &j.Reduce, "input_format": &j.InputFormat, "combine": &j.Combine, "combine_exec": &j.Combine,
		"input_dir": &j.Input, "output_dir": &j.Output, "work_dir": &j.Work, "log_dir": &j.Log, "extract_mode": &j.ExtractMode}
	ints := map[string]*int{"record_size": &j.RecordSize, "partitions": &j.Partitions, "max_attempts": &j.MaxAttempts, "rep": &j.Rep, "output_rep": &j.OutputRep, "local_slots": &j.LocalSlots}
	sizes := map[string]*int64{"split_size": &j.SplitSize, "sort_buffer": &j.SortBuffer, "bigblock_size": &j.SplitSize, "buffer_size": &j.SortBuffer}
	if p, ok := str[k]; ok {
		s, err := parseString(v)
		*p = s
		return err
	}
	if p, ok := ints[k]; ok {
		n, err := parseInt(v)
		if err != nil {
			return err
		}
		if n > 1<<30 {
			return fmt.Errorf("%d: too large", n)
		}
		*p = int(n)
		return nil
	}
	if p, ok := sizes[k]; ok {
		n, err := parseInt(v)
		*p = n
		return err
	}
	switch k {
	case "taskservers":
		s, err := parseStrings(v)
		j.TaskServers = s
		return err
	case "keep_work":
		switch v {
		case "true":
			j.KeepWork = true
		case "false":
			j.KeepWork = false
		default:
			return errors.New("not a boolean")
		}
		return nil
	}
	return errors.New("unknown key")
}
