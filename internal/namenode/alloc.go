package namenode

import "math/bits"

// blockMap records which blocks of one datanode's block store are in use.
// The namenode rebuilds it at start-up from the committed block lists, so
// blocks allocated by transactions that never committed are free again.
type blockMap struct {
	used  []uint64
	size  uint64
	nused uint64
	next  uint64 // where the next search starts, to keep allocations contiguous
}

func newBlockMap(size uint64) *blockMap {
	return &blockMap{used: make([]uint64, (size+63)/64), size: size}
}

func (m *blockMap) isUsed(b uint64) bool { return m.used[b/64]&(1<<(b%64)) != 0 }

func (m *blockMap) set(start, n uint64) {
	for b := start; b < start+n; b++ {
		if !m.isUsed(b) {
			m.used[b/64] |= 1 << (b % 64)
			m.nused++
		}
	}
}

func (m *blockMap) clear(start, n uint64) {
	for b := start; b < start+n && b < m.size; b++ {
		if m.isUsed(b) {
			m.used[b/64] &^= 1 << (b % 64)
			m.nused--
		}
	}
}

func (m *blockMap) free() uint64 { return m.size - m.nused }

// firstFree returns the first free block at or after from, or m.size.
func (m *blockMap) firstFree(from uint64) uint64 {
	for from < m.size {
		w := m.used[from/64] | (1<<(from%64) - 1) // blocks before from count as used
		if w != ^uint64(0) {
			b := from/64*64 + uint64(bits.TrailingZeros64(^w))
			if b >= m.size {
				return m.size
			}
			return b
		}
		from = (from/64 + 1) * 64
	}
	return m.size
}

// runFrom returns how many consecutive free blocks start at b, up to max.
func (m *blockMap) runFrom(b, max uint64) uint64 {
	n := uint64(0)
	for n < max && b+n < m.size && !m.isUsed(b+n) {
		n++
	}
	return n
}

// alloc marks up to want contiguous free blocks as used and returns the run.
// It extends hint when that block is free, so a file that grows stays
// contiguous; otherwise it takes the first free run after the cursor. It
// returns n == 0 when the store is full.
func (m *blockMap) alloc(want, hint uint64) (start, n uint64) {
	if want == 0 || m.free() == 0 {
		return 0, 0
	}
	if hint > 0 && hint < m.size && !m.isUsed(hint) {
		start = hint
	} else {
		start = m.firstFree(m.next)
		if start == m.size {
			start = m.firstFree(0)
		}
		if start == m.size {
			return 0, 0
		}
	}
	n = m.runFrom(start, want)
	m.set(start, n)
	m.next = start + n
	return start, n
}

// firstUsedFrom returns the first used block at or after from, or m.size.
func (m *blockMap) firstUsedFrom(from uint64) uint64 {
	for b := from; b < m.size; b++ {
		if m.isUsed(b) {
			return b
		}
	}
	return m.size
}

// resize grows or shrinks the map (blocks beyond a shrunk size must be free).
func (m *blockMap) resize(size uint64) {
	words := make([]uint64, (size+63)/64)
	copy(words, m.used)
	if size < m.size && size%64 != 0 {
		words[len(words)-1] &= 1<<(size%64) - 1
	}
	m.used = words
	m.size = size
	if m.next > size {
		m.next = 0
	}
}

func (m *blockMap) isUsedSafe(b uint64) bool { return b < m.size && m.isUsed(b) }
