package mapred

import (
	"slices"
	"testing"

	"github.com/plasmafs/plasma/client"
)

func TestSplitFile(t *testing.T) {
	rep := func(ids ...string) []client.Replica {
		var rs []client.Replica
		for _, id := range ids {
			rs = append(rs, client.Replica{Datanode: id, Alive: true})
		}
		return rs
	}
	xs := []client.Extent{{Index: 0, Count: 3, Replicas: rep("A")}, {Index: 3, Count: 2, Replicas: rep("A", "B")}, {Index: 5, Count: 4, Replicas: rep("B")}}
	got := splitFile("/f", 9*10-5, 10, 40, xs, map[string]int{})
	want := []inputSplit{{"/f", 0, 40, "A"}, {"/f", 40, 80, "B"}, {"/f", 80, 85, "B"}}
	if !slices.Equal(got, want) {
		t.Fatalf("splits %v, want %v", got, want)
	}
	// A change of datanode cuts a split short.
	xs = []client.Extent{{Index: 0, Count: 2, Replicas: rep("A")}, {Index: 2, Count: 2, Replicas: rep("B")}}
	got = splitFile("/g", 40, 10, 1000, xs, map[string]int{})
	want = []inputSplit{{"/g", 0, 20, "A"}, {"/g", 20, 40, "B"}}
	if !slices.Equal(got, want) {
		t.Fatalf("splits %v, want %v", got, want)
	}
}

func TestParseJob(t *testing.T) {
	j, err := ParseJob(`
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
`)
	if err != nil {
		t.Fatal(err)
	}
	if j.Map != `awk '{print $1 "\t1"}' # not a comment` || j.Partitions != 8 || j.SortBuffer != 1<<20 || j.SplitSize != 131072 ||
		!slices.Equal(j.TaskServers, []string{"a:1", "b:2"}) || !j.KeepWork || j.Output != "/out" {
		t.Fatalf("parsed %+v", j)
	}
	j.Defaults()
	if err := j.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"nokey", "partitions = x", "unknown = 1", "[table]", `taskservers = "a"`} {
		if _, err := ParseJob(bad); err == nil {
			t.Fatalf("%q accepted", bad)
		}
	}
}
