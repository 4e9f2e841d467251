package kv

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/plasmafs/plasma/client"
	"github.com/plasmafs/plasma/internal/clustertest"
	"github.com/plasmafs/plasma/kv"
)

// TestKVPowerCut: a writer commits many versions of a database (small
// commits into fresh blocks, compactions that rewrite the tail in place,
// a vacuum), a last batch is being written when the power fails. After
// the restart the database opens at the last acknowledged version (or the
// in-flight batch is simply absent), every value is intact, and fsck
// is clean. Fails with the namenode at -relaxed (commits acknowledged
// before they are durable): the database is then gone entirely.
func TestKVPowerCut(t *testing.T) {
	c := clustertest.StartPowerCut(t, clustertest.Options{Datanodes: 2})
	ctx := context.Background()
	cl := c.Client(client.Config{})
	if err := kv.Create(ctx, cl, "/db", kv.CreateOptions{Rep: 2}); err != nil {
		t.Fatal(err)
	}
	db, err := kv.Open(ctx, cl, "/db", kv.Options{TailCommits: 4})
	if err != nil {
		t.Fatal(err)
	}
	models := map[uint64]map[string][]byte{1: {}}
	m := map[string][]byte{}
	var acked uint64 = 1
	val := func(ver uint64, i int) []byte {
		return bytes.Repeat([]byte(fmt.Sprintf("v%d-%d;", ver, i)), 10+(i*int(ver))%3000)
	}
	for round := 0; round < 30; round++ {
		if round == 20 {
			if _, err := db.Vacuum(ctx, kv.VacuumOptions{}); err != nil {
				t.Fatal(err)
			}
			acked++
			models[acked] = kvClone(m)
		}
		w, err := db.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		n := 1 + round%3
		if round%7 == 0 {
			n = 200 // a large batch: compacts
		}
		for i := 0; i < n; i++ {
			k := fmt.Sprintf("k%03d", (round*31+i)%250)
			if i%9 == 8 {
				w.Delete([]byte(k))
				delete(m, k)
				continue
			}
			v := val(acked+1, i)
			w.Put([]byte(k), v)
			m[k] = v
		}
		st, err := w.CommitStats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		acked = st.Version
		models[acked] = kvClone(m)
	}
	// A batch in flight: values written, not committed.
	w, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 50; i++ {
		w.Put([]byte(fmt.Sprintf("inflight%02d", i)), val(999, i))
	}

	c.PowerCut()
	db.Close()
	cl.Close()

	cl2 := c.Client(client.Config{})
	defer cl2.Close()
	db2, err := kv.Open(ctx, cl2, "/db", kv.Options{})
	if err != nil {
		t.Fatalf("open after the power cut: %v", err)
	}
	defer db2.Close()
	s := db2.Snapshot()
	defer s.Release()
	if s.Version() != acked {
		t.Fatalf("version %d after the power cut, last acknowledged %d", s.Version(), acked)
	}
	_ = w // never committed: its transaction died with the connection
	want := models[acked]
	if s.Len() != int64(len(want)) {
		t.Fatalf("%d keys, want %d", s.Len(), len(want))
	}
	for k, v := range want {
		if got, err := s.Get([]byte(k)); err != nil || !bytes.Equal(got, v) {
			t.Fatalf("key %s: %d bytes, %v", k, len(got), err)
		}
	}
	// Writable again, and fsck finds nothing wrong.
	w2, err := db2.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w2.Put([]byte("after"), []byte("the power came back"))
	if err := w2.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if out, code := c.Run(nil, "fsck"); code != 0 {
		t.Fatalf("fsck: %s", out)
	}
}

func kvClone(m map[string][]byte) map[string][]byte {
	out := make(map[string][]byte, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
