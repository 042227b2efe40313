package walk

import "slices"

// Best keeps the best Max values offered, in any order, by an ordering
// where a negative Compare(a, b) means a ranks before b. The worst value
// kept is at the root of a heap, so an offer costs O(log Max). It is not
// safe for concurrent use.
type Best[T any] struct {
	h bestHeap[T]
}

// NewBest returns an empty Best keeping up to max values ordered by cmp.
func NewBest[T any](max int, cmp func(a, b T) int) *Best[T] {
	return &Best[T]{h: bestHeap[T]{max: max, cmp: cmp}}
}

// Len returns how many values are kept.
func (b *Best[T]) Len() int { return len(b.h.s) }

// Full reports whether Max values are kept, so that an offer must beat
// the worst of them.
func (b *Best[T]) Full() bool { return len(b.h.s) >= b.h.max }

// Worst returns the worst value kept; only when Len is not 0.
func (b *Best[T]) Worst() T { return b.h.s[0] }

// Admits reports whether Offer would keep v.
func (b *Best[T]) Admits(v T) bool {
	return !b.Full() || b.h.cmp(v, b.h.s[0]) < 0
}

// Offer keeps v if it is among the best seen, dropping the worst kept when
// full, and reports whether v was kept.
func (b *Best[T]) Offer(v T) bool {
	h := &b.h
	if !b.Full() {
		h.s = append(h.s, v)
		h.up(len(h.s) - 1)
		return true
	}
	if h.cmp(v, h.s[0]) >= 0 {
		return false
	}
	h.s[0] = v
	h.down(0)
	return true
}

// All returns the values kept, in no order; the slice is Best's own.
func (b *Best[T]) All() []T { return b.h.s }

// Sorted returns a copy of the values kept, best first.
func (b *Best[T]) Sorted() []T {
	out := slices.Clone(b.h.s)
	slices.SortFunc(out, b.h.cmp)
	return out
}

// Sort returns the values kept, best first, sorting them in place: the
// slice is Best's own, and Best must not be used after.
func (b *Best[T]) Sort() []T {
	slices.SortFunc(b.h.s, b.h.cmp)
	return b.h.s
}

// bestHeap is a max-heap by cmp: the worst value at the root. It sifts
// its values itself rather than through container/heap, whose interface
// calls cost more than the comparisons on a hot search path.
type bestHeap[T any] struct {
	s   []T
	max int
	cmp func(a, b T) int
}

// worse reports whether the value at i ranks after the one at j.
func (h *bestHeap[T]) worse(i, j int) bool { return h.cmp(h.s[i], h.s[j]) > 0 }

func (h *bestHeap[T]) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !h.worse(i, p) {
			return
		}
		h.s[i], h.s[p] = h.s[p], h.s[i]
		i = p
	}
}

func (h *bestHeap[T]) down(i int) {
	n := len(h.s)
	for {
		c := 2*i + 1
		if c >= n {
			return
		}
		if r := c + 1; r < n && h.worse(r, c) {
			c = r
		}
		if !h.worse(c, i) {
			return
		}
		h.s[i], h.s[c] = h.s[c], h.s[i]
		i = c
	}
}
