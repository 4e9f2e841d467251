package mapred

import (
	"fmt"
	"slices"
)

// mapCombiner is the in-mapper combiner of a Go-API job: the map task's
// emitted records are gathered per key in a hash table inside the task
// process and handed to Combine before they cross the pipe to the task
// runner. With a combiner that shrinks its input (counts, sums, minima),
// the runner then sorts and spills a few records per distinct key instead
// of one per emitted record. A combiner may run any number of times on any
// subset of a key's values, so combining here keeps the job's result.
type mapCombiner struct {
	combine func(key []byte, values [][]byte, emit Emit) error
	out     func(key, value []byte) error // to the pipe
	keys    map[string]int                // key -> index in groups
	groups  []group
	arena   []byte // the values' bytes; reset at each flush
	used    int    // bytes held: keys, values and their bookkeeping
	limit   int
	batch   int // values per key that trigger combining that key
}

type group struct {
	key  string
	vals [][]byte
}

// Per-entry bookkeeping estimates, so that the limit bounds real memory.
const (
	groupOverhead = 96
	valueOverhead = 24
)

func newMapCombiner(combine func([]byte, [][]byte, Emit) error, out func(key, value []byte) error, limit int) *mapCombiner {
	return &mapCombiner{combine: combine, out: out, keys: map[string]int{}, limit: limit, batch: 64}
}

// add gathers one emitted record; the bytes are copied.
func (m *mapCombiner) add(key, value []byte) error {
	i, ok := m.keys[string(key)] // no allocation for the lookup
	if !ok {
		i = len(m.groups)
		k := string(key)
		m.keys[k] = i
		m.groups = append(m.groups, group{key: k})
		m.used += len(k) + groupOverhead
	}
	g := &m.groups[i]
	g.vals = append(g.vals, m.keep(value))
	m.used += len(value) + valueOverhead
	if len(g.vals) >= m.batch {
		// Combine this key now: its values collapse, typically to one.
		if err := m.combineGroup(g); err != nil {
			return err
		}
		if len(g.vals) >= m.batch {
			// The combiner does not shrink this key: let it through.
			m.batch *= 2
		}
	}
	if m.used > m.limit {
		return m.flush()
	}
	return nil
}

// keep copies b into the arena, whose earlier slices stay valid: a full
// arena is replaced, not grown in place.
func (m *mapCombiner) keep(b []byte) []byte {
	if len(m.arena)+len(b) > cap(m.arena) {
		m.arena = make([]byte, 0, max(1<<20, len(b)))
	}
	m.arena = append(m.arena, b...)
	return m.arena[len(m.arena)-len(b) : len(m.arena) : len(m.arena)]
}

// combineGroup replaces g's values by what Combine emits for them.
func (m *mapCombiner) combineGroup(g *group) error {
	vals := g.vals
	g.vals = make([][]byte, 0, 4)
	key := []byte(g.key)
	err := m.combine(key, vals, func(k, v []byte) error {
		if string(k) != g.key {
			return errCombinerKey(g.key, k)
		}
		g.vals = append(g.vals, m.keep(v))
		return nil
	})
	for _, v := range vals {
		m.used -= len(v) + valueOverhead
	}
	for _, v := range g.vals {
		m.used += len(v) + valueOverhead
	}
	return err
}

// flush combines every key's values, in key order, and writes them out;
// the table starts empty again.
func (m *mapCombiner) flush() error {
	slices.SortFunc(m.groups, func(a, b group) int {
		switch {
		case a.key < b.key:
			return -1
		case a.key > b.key:
			return 1
		}
		return 0
	})
	for i := range m.groups {
		g := &m.groups[i]
		if len(g.vals) > 1 {
			if err := m.combineGroup(g); err != nil {
				return err
			}
		}
		for _, v := range g.vals {
			if err := m.out([]byte(g.key), v); err != nil {
				return err
			}
		}
	}
	clear(m.keys)
	m.groups = m.groups[:0]
	m.arena = nil
	m.used = 0
	return nil
}

func errCombinerKey(want string, got []byte) error {
	return fmt.Errorf("the combiner was given key %q and emitted key %q: Combine must keep the key", want, got)
}
