package kv

import (
	"fmt"
	"sync"
	"testing"
)

// TestLRUBound: the byte limit holds over all shards, whatever the
// entries' sizes; recently used entries survive.
func TestLRUBound(t *testing.T) {
	c := newLRU[string, []byte](10 << 20)
	for i := 0; i < 200; i++ {
		c.put(fmt.Sprint("big", i), nil, 1<<20)
		if b := c.bytes.Load(); b > 10<<20 {
			t.Fatalf("after %d puts: %d bytes cached", i+1, b)
		}
		c.get("big0") // keep it recent
	}
	if _, ok := c.get("big0"); !ok {
		t.Fatal("the most recently used entry was evicted")
	}
	if b := c.bytes.Load(); b < 8<<20 {
		t.Fatalf("only %d bytes cached of 10 MiB", b)
	}
	if got := c.put("huge", []byte("x"), 5<<20); string(got) != "x" {
		t.Fatal(got)
	}
	if _, ok := c.get("huge"); ok {
		t.Fatal("an entry of half the cache was kept")
	}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 2000; i++ {
				k := fmt.Sprint(g, "/", i%300)
				if _, ok := c.get(k); !ok {
					c.put(k, nil, int64(1000+i%7*30000))
				}
			}
		}()
	}
	wg.Wait()
	if b := c.bytes.Load(); b > 10<<20 {
		t.Fatalf("%d bytes cached after concurrent use", b)
	}
}
