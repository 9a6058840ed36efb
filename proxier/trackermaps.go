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

// nextFlat gives the by-port map the next State holds. A State shares
// the map with its tracker, which never writes a map it has handed out:
// when nothing is pending the new State gets the same map (no copy, so an
// endpoint-only change copies no service map); otherwise a copy of it,
// sized for adds more entries, changed by edit. Only the map of the last
// State and the one its backend still holds are ever alive, not a third
// kept by the tracker.
func nextFlat[V any](flat map[ServicePortName]V, peak *shrink.Peak, pending, adds int, edit func(map[ServicePortName]V)) map[ServicePortName]V {
	if pending == 0 {
		return flat
	}
	var next map[ServicePortName]V
	if adds > len(flat)/4 { // a large fill (the initial list): size it once
		next = make(map[ServicePortName]V, len(flat)+adds)
		maps.Copy(next, flat)
	} else {
		next = maps.Clone(flat)
	}
	edit(next)
	return shrink.Map(next, peak)
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
