package proxier

import "github.com/switchyard-proxy/switchyard/internal/shrink"

// The long-lived maps of both change trackers are kept small: per Service
// they keep only the port keys (the values live in the flat map), and the
// maps are copied after mass deletions (see package shrink).

// trackerPeaks are the high-water marks of a tracker's long-lived maps.
type trackerPeaks struct {
	slices, applied, flat shrink.Peak
}

// portKeys lists the service ports of one Service's map. The trackers
// keep these per Service rather than the maps themselves: a Go map with
// one entry of this key type costs ~700 bytes, and the values are in the
// tracker's flat map anyway.
func portKeys[V any](m map[ServicePortName]V) []ServicePortName {
	keys := make([]ServicePortName, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	return keys
}

// appliedPorts rebuilds one Service's map from its port keys and the flat
// map; nil when it has none.
func appliedPorts[V any](keys []ServicePortName, flat map[ServicePortName]V) map[ServicePortName]V {
	if len(keys) == 0 {
		return nil
	}
	out := make(map[ServicePortName]V, len(keys))
	for _, k := range keys {
		out[k] = flat[k]
	}
	return out
}
