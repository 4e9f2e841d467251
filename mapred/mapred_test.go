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

// TestParseJob: the job file every field of which TestJobFilesParseAsBefore
// checks is a valid job once defaulted (what is refused: TestJobFileErrors).
func TestParseJob(t *testing.T) {
	j, err := ParseJob(unitJobFile)
	if err != nil {
		t.Fatal(err)
	}
	j.Defaults()
	if err := j.Validate(); err != nil {
		t.Fatal(err)
	}
}
