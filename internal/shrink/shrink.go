package shrink

// minPeak is the high-water mark below which maps are left alone: their
// spare space is small, and copying them would cost more than it frees.
const minPeak = 256

// Peak is the high-water mark of one map's size since its last copy.
type Peak struct {
	n int
}

// Map returns m, or a copy of m sized for its current entries when m
// has fallen to a quarter of its high-water mark p. Each copy costs
// O(len(m)) and follows at least three times as many deletions, so the
// cost is amortised over them. A nil m stays nil.
func Map[M ~map[K]V, K comparable, V any](m M, p *Peak) M {
	p.n = max(p.n, len(m))
	if p.n < minPeak || len(m) > p.n/4 {
		return m
	}
	out := make(M, len(m))
	for k, v := range m {
		out[k] = v
	}
	p.n = len(m)
	return out
}

// Clear empties m for reuse, or returns a new empty map when m held
// enough entries that keeping its space would waste memory.
func Clear[M ~map[K]V, K comparable, V any](m M) M {
	if len(m) >= minPeak {
		return make(M)
	}
	clear(m)
	return m
}
