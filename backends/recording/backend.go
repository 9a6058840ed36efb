package recording

import (
	"context"
	"sort"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/proxier"
)

// Name is the backend's Name, the mode its syncs are reported under.
const Name = "recording"

// maxNamed is how many changed service ports a Sync record names; a sync
// that changed more (a full one) gives only their count.
const maxNamed = 16

// Sync is one completed sync as the backend saw it.
type Sync struct {
	// At is when the backend finished "programming" it.
	At   time.Time
	Full bool
	// Changed counts the service ports the sync changed (all of them when
	// Full); Names lists them, sorted, when there are at most maxNamed.
	Changed int
	Names   []string
	// Services and Endpoints count what the backend holds after it: the
	// service ports, and their selected cluster endpoints over every family.
	Services  int
	Endpoints int
}

// Backend is the recording backend. Create it with New.
type Backend struct {
	families []v1.IPFamily
	report   func(Sync)

	mu       sync.Mutex
	selected map[proxier.ServicePortName]int // selected endpoints, all families
	total    int
	syncs    int
}

// New returns a backend for the given families (IPv4 when empty) that calls
// report, when not nil, after every sync (from the sync loop: it must not
// block for long).
func New(families []v1.IPFamily, report func(Sync)) *Backend {
	if len(families) == 0 {
		families = []v1.IPFamily{v1.IPv4Protocol}
	}
	return &Backend{families: families, report: report, selected: map[proxier.ServicePortName]int{}}
}

// Name implements proxier.Backend.
func (b *Backend) Name() string { return Name }

// Sync implements proxier.Backend: it selects the endpoints of every
// service port the diff changed (all of them on a full sync) as a
// dataplane's render would, and forgets the deleted ones.
func (b *Backend) Sync(_ context.Context, st *proxier.State, diff *proxier.Diff) (proxier.SyncResult, error) {
	b.mu.Lock()
	changed := b.apply(st, diff)
	rec := Sync{Full: diff.Full, Changed: changed, Services: len(b.selected), Endpoints: b.total}
	b.syncs++
	b.mu.Unlock()
	if !diff.Full && len(diff.Changed) <= maxNamed {
		rec.Names = names(diff.Changed)
	}
	rec.At = time.Now()
	if b.report != nil {
		b.report(rec)
	}
	return proxier.SyncResult{Full: diff.Full}, nil
}

// apply updates the selection and returns how many service ports it
// looked at.
func (b *Backend) apply(st *proxier.State, diff *proxier.Diff) int {
	if diff.Full {
		clear(b.selected)
		b.total = 0
		for name, sp := range st.Services {
			b.set(name, b.selectAll(sp, st.Endpoints[name], st.Node))
		}
		return len(st.Services)
	}
	for name := range diff.Changed {
		sp, ok := st.Services[name]
		if !ok {
			b.set(name, -1)
			continue
		}
		b.set(name, b.selectAll(sp, st.Endpoints[name], st.Node))
	}
	return len(diff.Changed)
}

// set records n selected endpoints for name; -1 forgets it.
func (b *Backend) set(name proxier.ServicePortName, n int) {
	b.total -= b.selected[name]
	if n < 0 {
		delete(b.selected, name)
		return
	}
	b.selected[name] = n
	b.total += n
}

// selectAll counts the endpoints the shared selection gives the port in
// every family: the cluster (internal) set, and the external one when it
// differs.
func (b *Backend) selectAll(sp *proxier.ServicePort, eps []proxier.Endpoint, node proxier.NodeInfo) int {
	n := 0
	for _, f := range b.families {
		sel := proxier.SelectEndpoints(sp, eps, node, f)
		n += len(sel.Internal(sp))
		if sp.ExternallyAccessible() {
			n += len(sel.External(sp))
		}
	}
	return n
}

// Cleanup implements proxier.Backend: it forgets everything.
func (b *Backend) Cleanup(context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	clear(b.selected)
	b.total = 0
	return nil
}

// Selected is how many endpoints the last sync selected for name, over
// every family, and whether the backend holds name at all.
func (b *Backend) Selected(name proxier.ServicePortName) (int, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, ok := b.selected[name]
	return n, ok
}

// Syncs is how many syncs the backend completed.
func (b *Backend) Syncs() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.syncs
}

func names(set map[proxier.ServicePortName]struct{}) []string {
	out := make([]string, 0, len(set))
	for n := range set {
		out = append(out, n.String())
	}
	sort.Strings(out)
	return out
}
