package ipvs

import "math/bits"

// markAllocator hands out the firewall marks of the internal-traffic
// virtual servers: values inside a contiguous mask, one per (family,
// service port), stable while the port needs one. A cursor moves on
// after each allocation so a released mark is not reused at once.
type markAllocator struct {
	shift int
	max   uint32 // largest id
	next  uint32
	byKey map[portKey]uint32
	used  map[uint32]portKey
}

func newMarkAllocator(mask uint32) *markAllocator {
	shift := bits.TrailingZeros32(mask)
	return &markAllocator{shift: shift, max: mask >> shift, next: 1,
		byKey: map[portKey]uint32{}, used: map[uint32]portKey{}}
}

// get returns k's mark, allocating one if needed; 0 when the mask is
// exhausted (the port then has no internal-traffic service: outside and
// inside clients both reach the local endpoints only).
func (a *markAllocator) get(k portKey) uint32 {
	if m, ok := a.byKey[k]; ok {
		return m
	}
	for range a.max {
		id := a.next
		a.next = a.next%a.max + 1
		m := id << a.shift
		if _, taken := a.used[m]; !taken {
			a.byKey[k], a.used[m] = m, k
			return m
		}
	}
	return 0
}

// release frees k's mark, if it has one.
func (a *markAllocator) release(k portKey) {
	if m, ok := a.byKey[k]; ok {
		delete(a.byKey, k)
		delete(a.used, m)
	}
}
