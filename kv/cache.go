package kv

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
)

// lru is a size-bounded cache, sharded so that many readers on all cores
// rarely meet on one lock. Entries are immutable.
type lru[K comparable, V any] struct {
	seed   maphash.Seed
	shards [16]lruShard[K, V]
	limit  int64
	bytes  atomic.Int64  // over all shards
	tick   atomic.Uint64 // a clock of uses
}

type lruShard[K comparable, V any] struct {
	mu   sync.Mutex
	m    map[K]*lruItem[K, V]
	head lruItem[K, V] // sentinel: head.next is the most recent
}

type lruItem[K comparable, V any] struct {
	k          K
	v          V
	cost       int64
	tick       uint64 // last use
	prev, next *lruItem[K, V]
}

func newLRU[K comparable, V any](limit int64) *lru[K, V] {
	c := &lru[K, V]{seed: maphash.MakeSeed(), limit: limit}
	for i := range c.shards {
		s := &c.shards[i]
		s.m = map[K]*lruItem[K, V]{}
		s.head.next, s.head.prev = &s.head, &s.head
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
	it.tick = c.tick.Add(1)
	s.unlink(it)
	s.pushFront(it)
	return it.v, true
}

// put adds k unless it is there already (then the cached value wins, so
// concurrent fillers agree) and returns the cached value. The byte limit
// holds for the whole cache, and what goes is the least recently used
// entry of all shards (the oldest of the shards' tails).
func (c *lru[K, V]) put(k K, v V, cost int64) V {
	if cost > c.limit/4 {
		return v // too large to keep
	}
	s := c.shard(k)
	s.mu.Lock()
	if it, ok := s.m[k]; ok {
		s.mu.Unlock()
		return it.v
	}
	it := &lruItem[K, V]{k: k, v: v, cost: cost, tick: c.tick.Add(1)}
	s.m[k] = it
	s.pushFront(it)
	s.mu.Unlock()
	for c.bytes.Add(cost) > c.limit {
		cost = -c.evictOldest()
		if cost == 0 {
			break
		}
	}
	return v
}

// evictOldest drops the least recently used entry and returns its cost
// (0 if the cache is empty).
func (c *lru[K, V]) evictOldest() int64 {
	for {
		var oldest *lruShard[K, V]
		var tick uint64
		for i := range c.shards {
			s := &c.shards[i]
			s.mu.Lock()
			if t := s.head.prev; t != &s.head && (oldest == nil || t.tick < tick) {
				oldest, tick = s, t.tick
			}
			s.mu.Unlock()
		}
		if oldest == nil {
			return 0
		}
		oldest.mu.Lock()
		t := oldest.head.prev
		if t == &oldest.head || t.tick != tick {
			oldest.mu.Unlock()
			continue // used or evicted meanwhile: look again
		}
		oldest.unlink(t)
		delete(oldest.m, t.k)
		oldest.mu.Unlock()
		return t.cost
	}
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
