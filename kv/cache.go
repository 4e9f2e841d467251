package kv

import (
	"hash/maphash"
	"sync"
)

// lru is a size-bounded cache, sharded so that many readers on all cores
// rarely meet on one lock. Entries are immutable.
type lru[K comparable, V any] struct {
	seed   maphash.Seed
	shards [16]lruShard[K, V]
}

type lruShard[K comparable, V any] struct {
	mu    sync.Mutex
	m     map[K]*lruItem[K, V]
	head  lruItem[K, V] // sentinel: head.next is the most recent
	bytes int64
	limit int64
}

type lruItem[K comparable, V any] struct {
	k          K
	v          V
	cost       int64
	prev, next *lruItem[K, V]
}

func newLRU[K comparable, V any](limit int64) *lru[K, V] {
	c := &lru[K, V]{seed: maphash.MakeSeed()}
	for i := range c.shards {
		s := &c.shards[i]
		s.m = map[K]*lruItem[K, V]{}
		s.head.next, s.head.prev = &s.head, &s.head
		s.limit = max(limit/int64(len(c.shards)), 1)
	}
	return c
}

func (c *lru[K, V]) shard(k K) *lruShard[K, V] {
	return &c.shards[maphash.Comparable(c.seed, k)%uint64(len(c.shards))]
}

func (c *lru[K, V]) get(k K) (V, bool) {
	s := c.shard(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	it, ok := s.m[k]
	if !ok {
		var zero V
		return zero, false
	}
	s.unlink(it)
	s.pushFront(it)
	return it.v, true
}

// put adds k unless it is there already (then the cached value wins, so
// concurrent fillers agree) and returns the cached value.
func (c *lru[K, V]) put(k K, v V, cost int64) V {
	s := c.shard(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	if it, ok := s.m[k]; ok {
		return it.v
	}
	if cost > s.limit {
		return v // too large to keep
	}
	it := &lruItem[K, V]{k: k, v: v, cost: cost}
	s.m[k] = it
	s.pushFront(it)
	s.bytes += cost
	for s.bytes > s.limit {
		old := s.head.prev
		s.unlink(old)
		delete(s.m, old.k)
		s.bytes -= old.cost
	}
	return v
}

func (s *lruShard[K, V]) unlink(it *lruItem[K, V]) {
	it.prev.next = it.next
	it.next.prev = it.prev
}

func (s *lruShard[K, V]) pushFront(it *lruItem[K, V]) {
	it.next = s.head.next
	it.prev = &s.head
	s.head.next.prev = it
	s.head.next = it
}
