package proxier

import "github.com/switchyard-proxy/switchyard/internal/shrink"

// The long-lived maps of both change trackers are kept small: per Service
// they keep one list of its ports, shared with the compact forms or the
// merge, never a map per Service (a Go map of one entry of these key types
// costs ~700 bytes); and the maps are copied after mass deletions (see
// package shrink).

// trackerPeaks are the high-water marks of a tracker's long-lived maps.
type trackerPeaks struct {
	slices, applied, flat shrink.Peak
}

// walkSorted calls f for each name in either of two lists sorted by name
// (compareNames): f(prev, cur) with nil for the list that lacks it.
// Diffing two sorted lists this way costs no map.
func walkSorted[V any](prev, cur []V, name func(*V) ServicePortName, f func(prev, cur *V)) {
	i, j := 0, 0
	for i < len(prev) || j < len(cur) {
		var c int
		switch {
		case i == len(prev):
			c = 1
		case j == len(cur):
			c = -1
		default:
			c = compareNames(name(&prev[i]), name(&cur[j]))
		}
		switch {
		case c < 0:
			f(&prev[i], nil)
			i++
		case c > 0:
			f(nil, &cur[j])
			j++
		default:
			f(&prev[i], &cur[j])
			i++
			j++
		}
	}
}
