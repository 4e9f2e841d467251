package mapred

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clustertest"
)

// A whole job against an in-process cluster (so the race detector sees
// the coordinator, the scheduler and the tasks), with the local runner,
// spills and a retried task: the output is the word count computed here.
func TestJobInProcess(t *testing.T) {
	cl := clustertest.StartInProcess(t, clustertest.Options{})
	c := cl.Client(t)
	ctx := context.Background()
	r := rand.New(rand.NewPCG(9, 9))
	var text bytes.Buffer
	want := map[string]int{}
	for i := 0; i < 4000; i++ {
		for k := 1 + r.IntN(8); k > 0; k-- {
			w := fmt.Sprintf("w%d", int(r.ExpFloat64()*50))
			want[w]++
			text.WriteString(w + " ")
		}
		text.WriteByte('\n')
	}
	err := c.Txn(ctx, func(ctx context.Context, tx *client.Txn) error {
		if _, err := tx.MkdirAll(ctx, "/in", 0o755); err != nil {
			return err
		}
		f, err := tx.CreateFile(ctx, "/in/t", client.CreateOptions{})
		if err != nil {
			return err
		}
		f.Write(text.Bytes())
		return f.Close()
	})
	if err != nil {
		t.Fatal(err)
	}
	mark := t.TempDir() + "/m"
	j := Job{Input: "/in", Output: "/out", Work: "/work", Log: "/log", Partitions: 3, SplitSize: 64 << 10, SortBuffer: 16 << 10, LocalSlots: 3,
		Map:    fmt.Sprintf(`if mkdir %s 2>/dev/null; then exit 1; fi; tr -s ' ' '\n' | grep -v '^$' | sed 's/$/\t1/'`, mark),
		Reduce: `cut -f1 | uniq -c`}
	rep, err := Run(ctx, c, j, Options{})
	if err != nil {
		t.Fatalf("%v\n%s", err, rep.Text())
	}
	if rep.Retries != 1 || rep.Counters.Spills == 0 {
		t.Fatalf("retries %d, spills %d", rep.Retries, rep.Counters.Spills)
	}
	tx := c.Begin()
	defer tx.Abort(ctx)
	var got []string
	for p := 0; p < 3; p++ {
		f, err := tx.Open(ctx, fmt.Sprintf("/out/part-%05d", p))
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		f.WriteTo(&b)
		for _, l := range strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n") {
			var n int
			var w string
			if _, err := fmt.Sscan(l, &n, &w); err != nil {
				t.Fatalf("line %q: %v", l, err)
			}
			got = append(got, fmt.Sprint(w, n))
		}
	}
	var exp []string
	for w, n := range want {
		exp = append(exp, fmt.Sprint(w, n))
	}
	sort.Strings(got)
	sort.Strings(exp)
	if strings.Join(got, ",") != strings.Join(exp, ",") {
		t.Fatalf("got %v\nwant %v", got, exp)
	}
}
