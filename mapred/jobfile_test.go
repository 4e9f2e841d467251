package mapred

import (
	"reflect"
	"strings"
	"testing"
)

// unitJobFile is a job file in the forms the hand-written parser took.
const unitJobFile = `
name = "wc"   # comment
input = "/in"
output = '/out'
work = "/w"
log = "/l"
map = '''awk '{print $1 "\t1"}' # not a comment'''
reduce = "uniq -c"
partitions = 8
sort_buffer = "1M"
split_size = 131072
taskservers = ["a:1",
  "b:2"]
keep_work = true
`

// TestJobFilesParseAsBefore: the job files the tests and the README use
// (and the forms the hand-written parser accepted: comments after values,
// literal and multi-line literal strings, sizes as strings or integers
// with underscores, arrays over several lines, the original's key names)
// parse to the same Job with the TOML library as they did before it.
func TestJobFilesParseAsBefore(t *testing.T) {
	for _, c := range []struct {
		name, text string
		want       Job
	}{
		{"unit", unitJobFile, Job{Name: "wc", Input: "/in", Output: "/out", Work: "/w", Log: "/l", Map: `awk '{print $1 "\t1"}' # not a comment`,
			Reduce: "uniq -c", Partitions: 8, SortBuffer: 1 << 20, SplitSize: 131072, TaskServers: []string{"a:1", "b:2"}, KeepWork: true}},
		{"wordcount (tests/mr/mr_test.go)", `# word count
name = "wordcount"
input = "/in"
output = "/out"
work = "/work"
log = "/log"
map = '''tr -cs 'A-Za-z' '\n' | awk 'NF { print $0 "\t1" }''''
reduce = "awk -F'\t' '{ c[$1] += $2 } END { for (k in c) print k \"\t\" c[k] }'"
partitions = 3
split_size = "64K"
sort_buffer = "16K"   # tiny: many spills and merge passes
local_slots = 3
`, Job{Name: "wordcount", Input: "/in", Output: "/out", Work: "/work", Log: "/log",
			Map:        `tr -cs 'A-Za-z' '\n' | awk 'NF { print $0 "\t1" }'`,
			Reduce:     "awk -F'\t' '{ c[$1] += $2 } END { for (k in c) print k \"\t\" c[k] }'",
			Partitions: 3, SplitSize: 64 << 10, SortBuffer: 16 << 10, LocalSlots: 3}},
		{"original env (tests/mr/mr_streaming_test.go)", `name = "envjob"
input = "/in"
output = "/out"
work = "/work"
log = "/logs"
map = "sh /tmp/x/env.sh"
reduce = '''sh -c 'env | grep ^PLASMAMR_' '''
partitions = 1
split_size = "1M"
`, Job{Name: "envjob", Input: "/in", Output: "/out", Work: "/work", Log: "/logs", Map: "sh /tmp/x/env.sh",
			Reduce: "sh -c 'env | grep ^PLASMAMR_' ", Partitions: 1, SplitSize: 1 << 20}},
		{"extract mode", `input = "/in"
output = "/kpv"
work = "/work"
partitions = 4
max_attempts = 1
extract_mode = "key_tab_partition_tab_value"
map = '''awk '{ printf "key%05d\t%d\tvalue %s\n", $1, $1 % 4, $1 }' '''
`, Job{Input: "/in", Output: "/kpv", Work: "/work", Partitions: 4, MaxAttempts: 1, ExtractMode: "key_tab_partition_tab_value",
			Map: `awk '{ printf "key%05d\t%d\tvalue %s\n", $1, $1 % 4, $1 }' `}},
		{"auto input", `input = "/in"
output = "/out"
work = "/work"
input_format = "auto"
map = "cat >/dev/null"
partitions = 1
`, Job{Input: "/in", Output: "/out", Work: "/work", InputFormat: "auto", Map: "cat >/dev/null", Partitions: 1}},
		{"the original's key names", `input_dir = "/in"
output_dir = "/out"
work_dir = "/work"
log_dir = "/log"
map_exec = "cat"
reduce_exec = "sort"
combine_exec = "uniq"
bigblock_size = "4M"
buffer_size = 1_048_576
input_format = "fixed"
record_size = "100"
rep = 2
output_rep = 3
local_slots = 4
keep_work = false
taskservers = [
  "h1:9000", # first
  'h2:9000',
]
`, Job{Input: "/in", Output: "/out", Work: "/work", Log: "/log", Map: "cat", Reduce: "sort", Combine: "uniq", SplitSize: 4 << 20,
			SortBuffer: 1 << 20, InputFormat: "fixed", RecordSize: 100, Rep: 2, OutputRep: 3, LocalSlots: 4, TaskServers: []string{"h1:9000", "h2:9000"}}},
		{"escapes and sizes", `name = "tab\there \"quoted\""
map = "printf 'a\\tb\\n'"
split_size = "2G"
sort_buffer = "64k"
partitions = 1_000
`, Job{Name: "tab\there \"quoted\"", Map: `printf 'a\tb\n'`, SplitSize: 2 << 30, SortBuffer: 64 << 10, Partitions: 1000}},
	} {
		got, err := ParseJob(c.text)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Fatalf("%s: parsed\n%+v\nwant\n%+v", c.name, got, c.want)
		}
	}
}

// TestJobFileErrors: what is not a job file is refused, naming the key.
func TestJobFileErrors(t *testing.T) {
	for _, c := range []struct{ text, want string }{
		{"nokey", ""},
		{"partitions = x", ""},
		{"unknown = 1", "unknown"},
		{"[table]", ""},
		{`taskservers = "a"`, "taskservers"},
		{`partitions = "2T"`, "partitions"},
		{`split_size = "-1"`, "split_size"},
		{`keep_work = "yes"`, "keep_work"},
		{`name = 3`, "name"},
	} {
		_, err := ParseJob(c.text)
		if err == nil {
			t.Fatalf("%q accepted", c.text)
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Fatalf("%q: error %q does not name %q", c.text, err, c.want)
		}
	}
}
