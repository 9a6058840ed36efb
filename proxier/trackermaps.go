package proxier

import (
	"maps"

	"github.com/switchyard-proxy/switchyard/internal/shrink"
)

// The long-lived maps of both change trackers are kept small: per Service
// they keep one list of its ports, shared with the compact forms or the
// merge, never a map per Service (a Go map of one entry of these key types
// costs ~700 bytes); and the maps are copied after mass deletions (see
// package shrink).

// nextFlat gives the by-port map the next State holds: flat itself,
// changed in place by edit (a change costs what it changes; the previous
// State's values of changed names are in its Diff, see Diff.Previous),
// or a copy sized for a large fill (the initial list), so that the map is
// not grown insert by insert.
func nextFlat[V any](flat map[ServicePortName]V, peak *shrink.Peak, pending, adds int, edit func(map[ServicePortName]V)) map[ServicePortName]V {
	if pending == 0 {
		return flat
	}
	if adds > len(flat)/4 {
		next := make(map[ServicePortName]V, len(flat)+adds)
		maps.Copy(next, flat)
		flat = next
	}
	edit(flat)
	return shrink.Map(flat, peak)
}

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
