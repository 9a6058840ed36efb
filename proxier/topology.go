package proxier

import (
	"runtime"
	"strings"
	"sync"
	"weak"

	discovery "k8s.io/api/discovery/v1"
)

// topologyInterner hands out one shared EndpointTopology per distinct
// zone and hints, so that an endpoint carries a pointer to it rather than
// its own strings and lists (a cluster has a few zones and hint sets and
// hundreds of thousands of endpoints). It holds them weakly: one that no
// endpoint uses any more is collected and forgotten.
type topologyInterner struct {
	mu sync.Mutex
	m  map[topologyKey]weak.Pointer[EndpointTopology]
}

// topologyKey is an EndpointTopology in comparable form: each hint
// followed by a byte no name contains, so that no hints and one empty
// hint differ.
type topologyKey struct {
	zone, zoneHints, nodeHints string
}

func newTopologyInterner() *topologyInterner {
	return &topologyInterner{m: map[topologyKey]weak.Pointer[EndpointTopology]{}}
}

// get returns the shared topology of an endpoint, nil when it has no zone
// and no hints.
func (in *topologyInterner) get(zone *string, hints *discovery.EndpointHints) *EndpointTopology {
	var zoneHints, nodeHints []string
	if hints != nil {
		for _, z := range hints.ForZones {
			zoneHints = append(zoneHints, z.Name)
		}
		for _, n := range hints.ForNodes {
			nodeHints = append(nodeHints, n.Name)
		}
	}
	k := topologyKey{zoneHints: joinNames(zoneHints), nodeHints: joinNames(nodeHints)}
	if zone != nil {
		k.zone = *zone
	}
	if k == (topologyKey{}) {
		return nil
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if t := in.m[k].Value(); t != nil {
		return t
	}
	t := &EndpointTopology{Zone: intern(k.zone), ZoneHints: internAll(zoneHints), NodeHints: internAll(nodeHints)}
	k.zone = t.Zone // the key keeps no decoded string alive
	in.m[k] = weak.Make(t)
	runtime.AddCleanup(t, in.forget, k)
	return t
}

// forget drops the entry of a collected topology (unless it was replaced).
func (in *topologyInterner) forget(k topologyKey) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if wp, ok := in.m[k]; ok && wp.Value() == nil {
		delete(in.m, k)
	}
}

// size is the number of topologies remembered (for tests).
func (in *topologyInterner) size() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return len(in.m)
}

func internAll(names []string) []string {
	for i, n := range names {
		names[i] = intern(n)
	}
	return names
}

func joinNames(names []string) string {
	var b strings.Builder
	for _, n := range names {
		b.WriteString(n)
		b.WriteByte(0)
	}
	return b.String()
}
