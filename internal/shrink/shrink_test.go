package shrink

import (
	"reflect"
	"runtime"
	"testing"
)

func TestMapCopiesOnlyAfterMassDeletion(t *testing.T) {
	var p Peak
	m := map[int]int{}
	for i := range 1000 {
		m[i] = i
	}
	if got := Map(m, &p); !same(got, m) {
		t.Fatal("a map at its peak was copied")
	}
	for i := range 700 {
		delete(m, i)
	}
	if got := Map(m, &p); !same(got, m) {
		t.Fatal("a map at 30% of its peak was copied")
	}
	for i := 700; i < 760; i++ {
		delete(m, i)
	}
	got := Map(m, &p)
	if same(got, m) {
		t.Fatal("a map at 24% of its peak was not copied")
	}
	if len(got) != 240 || got[999] != 999 || got[759] != 0 {
		t.Fatalf("copy has %d entries, [999]=%d [759]=%d", len(got), got[999], got[759])
	}
	if p.n != 240 {
		t.Errorf("peak after the copy = %d, want 240 (the new size)", p.n)
	}
}

func TestMapLeavesSmallMapsAlone(t *testing.T) {
	var p Peak
	m := map[string]bool{}
	for i := range minPeak - 1 {
		m[string(rune('a'+i))] = true
	}
	clear(m)
	if got := Map(m, &p); !same(got, m) {
		t.Error("a map that never reached minPeak was copied")
	}
	var nilMap map[string]int
	if got := Map(nilMap, &p); got != nil {
		t.Error("nil map became non-nil")
	}
}

// TestMapReleasesMemory shows the point of the package: after deleting
// nearly all entries the copy lets the GC free the old map's storage.
func TestMapReleasesMemory(t *testing.T) {
	var p Peak
	m := map[[4]uint64][64]byte{}
	for i := range 50_000 {
		m[[4]uint64{uint64(i)}] = [64]byte{}
	}
	Map(m, &p)
	for k := range m {
		if k[0] >= 10 {
			delete(m, k)
		}
	}
	before := liveHeap()
	m = Map(m, &p)
	after := liveHeap()
	if len(m) != 10 {
		t.Fatalf("len = %d, want 10", len(m))
	}
	if before-after < 2<<20 {
		t.Errorf("live heap %d -> %d bytes: the copy freed less than 2 MiB of a ~5 MiB map", before, after)
	}
}

func liveHeap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// same reports whether a and b are the same map object.
func same[K comparable, V any](a, b map[K]V) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

func TestClear(t *testing.T) {
	small := map[int]bool{1: true}
	if got := Clear(small); len(got) != 0 || !same(got, small) {
		t.Errorf("small map: got %v, same object %v; want it emptied in place", got, same(got, small))
	}
	big := map[int]bool{}
	for i := range minPeak {
		big[i] = true
	}
	if got := Clear(big); len(got) != 0 || same(got, big) || got == nil {
		t.Errorf("big map: got len %d, same object %v; want a new empty map", len(got), same(got, big))
	}
}
