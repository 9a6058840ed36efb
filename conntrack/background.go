package conntrack

import (
	"maps"
	"slices"

	"github.com/switchyard-proxy/switchyard/internal/ctnetlink"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// Passes in the background (Config.Background). A pass over a table of
// millions of entries takes seconds of the kernel's walks; run inside the
// sync it delays the next sync (the runner paces syncs by the time they
// take), and with it the programming of the next endpoint change. In the
// background one goroutine makes the passes one after the other; a pass
// planned while another runs waits, and passes planned meanwhile merge
// into one, with the latest State's decisions (its index) and every
// address any of them named.

// enqueue hands a planned pass to the background goroutine, starting it
// when idle.
func (r *Reconciler) enqueue(j *job) {
	r.bg.Lock()
	defer r.bg.Unlock()
	if r.queued != nil {
		j = mergeJobs(r.queued, j)
	}
	r.queued = j
	if !r.running {
		r.running = true
		go r.drain()
	}
}

// drain runs queued passes until none is left.
func (r *Reconciler) drain() {
	for {
		r.bg.Lock()
		j := r.queued
		r.queued = nil
		if j == nil {
			r.running = false
			r.bg.Unlock()
			return
		}
		r.bg.Unlock()
		if _, err := r.run(j); err != nil {
			klog.ErrorS(err, "Conntrack cleanup failed; retrying after the next sync")
		}
	}
}

// mergeJobs folds a waiting pass into a newer one: the newer one's
// indexes decide; the scopes are united per family (wide if either is);
// gone addresses of both are redone after a failure.
func mergeJobs(old, cur *job) *job {
	out := &job{wide: old.wide || cur.wide, gone: maps.Clone(cur.gone)}
	if out.gone == nil {
		out.gone = keySet{}
	}
	maps.Copy(out.gone, old.gone)
	for _, fp := range cur.families {
		if !out.wide {
			fp.scope = unionScope(fp.scope, scopeFor(old, fp.family))
		}
		out.families = append(out.families, fp)
	}
	// A family only the older pass had keeps its older index.
	for _, fp := range old.families {
		if scopeFor(cur, fp.family) == nil {
			out.families = append(out.families, fp)
		}
	}
	if out.wide {
		for i := range out.families {
			out.families[i].scope = wideScope(out.families[i].index)
		}
	}
	return out
}

// scopeFor is a job's scope of one family.
func scopeFor(j *job, fam v1.IPFamily) []ctnetlink.Filter {
	for _, fp := range j.families {
		if fp.family == fam {
			return fp.scope
		}
	}
	return nil
}

// unionScope is a and b without repeats.
func unionScope(a, b []ctnetlink.Filter) []ctnetlink.Filter {
	out := slices.Clone(a)
	for _, f := range b {
		if !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out
}

// idle reports that no pass runs or waits (for tests).
func (r *Reconciler) idle() bool {
	r.bg.Lock()
	defer r.bg.Unlock()
	return !r.running && r.queued == nil
}
