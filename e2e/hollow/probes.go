package hollow

import (
	"sync"
	"time"
)

// probeBook records when each hollow proxy saw each probe (an endpoint
// change written at a known time): the first time only.
type probeBook struct {
	mu      sync.Mutex
	written map[int]time.Time
	seen    map[int]map[string]time.Time // probe -> proxy -> time
}

func newProbeBook() *probeBook {
	return &probeBook{written: map[int]time.Time{}, seen: map[int]map[string]time.Time{}}
}

// wrote records probe p's write time.
func (b *probeBook) wrote(p int, at time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.written[p] = at
}

// saw records that proxy saw probe p at at (the first report counts).
func (b *probeBook) saw(p int, proxy string, at time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	m := b.seen[p]
	if m == nil {
		m = map[string]time.Time{}
		b.seen[p] = m
	}
	if _, dup := m[proxy]; !dup {
		m[proxy] = at
	}
}

// count is how many proxies saw probe p.
func (b *probeBook) count(p int) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.seen[p])
}

// fanout is, for probe p, the time from its write to the last of the
// proxies that saw it, and how many did; ok is false when p was not
// written or nobody saw it.
func (b *probeBook) fanout(p int) (last time.Duration, n int, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	w, written := b.written[p]
	if !written || len(b.seen[p]) == 0 {
		return 0, 0, false
	}
	for _, at := range b.seen[p] {
		last = max(last, at.Sub(w))
	}
	return last, len(b.seen[p]), true
}

// each lists every proxy's latency for probe p.
func (b *probeBook) each(p int) []time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	w, written := b.written[p]
	if !written {
		return nil
	}
	out := make([]time.Duration, 0, len(b.seen[p]))
	for _, at := range b.seen[p] {
		out = append(out, at.Sub(w))
	}
	return out
}
