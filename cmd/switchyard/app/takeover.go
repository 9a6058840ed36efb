package app

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/switchyard-proxy/switchyard/backends/ipvs"
	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
	"github.com/switchyard-proxy/switchyard/internal/iptables/sweep"
	"github.com/switchyard-proxy/switchyard/proxier"
)

// leftoverStep removes one kind of state a previous proxy (kube-proxy in
// any mode, or switchyard in another mode) left on the node, and says
// what it removed ("" for nothing).
type leftoverStep struct {
	kind string
	run  func(ctx context.Context) (string, error)
}

// takeover runs the leftover steps once, after the first successful sync:
// until then the predecessor's rules keep serving, and from then on this
// mode's rules are in the kernel, so no packet meets a node without a path
// to its service. A failed step is retried, all steps again, with a
// backoff, up to takeoverAttempts times (each step is idempotent).
//
// The steps run beside the sync loop, not in it: reading a large ruleset
// back (iptables-save of the nat table at 10k services) takes tens of
// seconds, and changes must not wait for it. What the steps remove is
// never what this mode writes (its modeSpec.ownsChain), and each kernel interface
// serialises the writes (the xtables lock, nf_tables transactions).
type takeover struct {
	steps []leftoverStep
	now   func() time.Time
	// spawn runs a pass of the steps (in a goroutine; inline in tests).
	spawn func(func())

	mu      sync.Mutex
	running bool
	done    bool
	attempt int
	next    time.Time
}

const (
	takeoverAttempts = 5
	takeoverBackoff  = 30 * time.Second
	// takeoverInUseRetry paces the checks of state left in place because
	// it still carries connections.
	takeoverInUseRetry = 30 * time.Second
)

// errInUse marks state a step left in place because connections still
// run through it (IPVS virtual servers): not a failure; it is checked
// again every takeoverInUseRetry until it is free.
var errInUse = errors.New("still carries connections")

func newTakeover(steps []leftoverStep) *takeover {
	return &takeover{steps: steps, now: time.Now, spawn: func(f func()) { go f() }}
}

// PostSync starts a pass of the steps when one is due and none runs.
func (t *takeover) PostSync(ctx context.Context, _ *proxier.State, _ *proxier.Diff) {
	t.mu.Lock()
	due := !t.done && !t.running && !t.now().Before(t.next)
	t.running = t.running || due
	t.mu.Unlock()
	if due {
		t.spawn(func() { t.pass(ctx) })
	}
}

// pass runs every step once and schedules what follows.
//
// A pass reads whole tables back (iptables-save of nat at 10k services is
// ~40 MB, parsed), so it hands the memory back to the OS when it ends, as
// a full sync does (memoryReleaser): passes are rare.
func (t *takeover) pass(ctx context.Context) {
	defer debug.FreeOSMemory()
	start := t.now()
	failed, inUse := 0, 0
	for _, s := range t.steps {
		removed, err := s.run(ctx)
		switch {
		case errors.Is(err, errInUse):
			inUse++
			klog.InfoS("Keeping a previous proxy's state while connections use it", "kind", s.kind, "reason", err)
		case err != nil:
			failed++
			klog.ErrorS(err, "Failed to remove a previous proxy's leftovers", "kind", s.kind, "attempt", t.attempt+1)
		}
		if removed != "" {
			klog.InfoS("Removed a previous proxy's leftovers", "kind", s.kind, "removed", removed)
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.running = false
	if failed == 0 && inUse > 0 {
		t.next = t.now().Add(takeoverInUseRetry)
		return
	}
	t.attempt++
	switch {
	case failed == 0:
		t.done = true
		klog.V(2).InfoS("Checked for a previous proxy's leftovers", "elapsed", t.now().Sub(start))
	case t.attempt >= takeoverAttempts:
		t.done = true
		klog.ErrorS(nil, "Giving up removing a previous proxy's leftovers; `switchyard --cleanup` removes them when the node stops proxying", "attempts", t.attempt)
	default:
		t.next = t.now().Add(takeoverBackoff << (t.attempt - 1))
	}
}

// leftoverSteps are the steps for the chosen mode, in the order the kernel
// needs: iptables chains first (the ipvs mode's rules use its sets), then
// IPVS state, then the nftables tables, then userspace's policy routing.
func leftoverSteps(o *Options) []leftoverStep {
	steps := []leftoverStep{{kind: "iptables", run: func(ctx context.Context) (string, error) {
		return sweepIPTables(ctx, specOf(o.Mode).ownsChain)
	}}}
	all := withAllFamilies(o)
	for _, s := range modes {
		if s.name == o.Mode || s.leftovers == nil {
			continue
		}
		steps = append(steps, leftoverStep{kind: string(s.name), run: func(ctx context.Context) (string, error) {
			return s.leftovers(ctx, all)
		}})
	}
	return steps
}

// removeNFTablesLeftovers deletes switchyard's and kube-proxy's nftables
// tables.
func removeNFTablesLeftovers(ctx context.Context, all *Options) (string, error) {
	b, err := newNFTablesBackend(all, nil)
	if err != nil {
		return "", err
	}
	tables, err := b.RemoveTables(ctx)
	return strings.Join(tables, ", "), err
}

// removeUserspaceLeftovers deletes the userspace mode's policy routes.
func removeUserspaceLeftovers(_ context.Context, all *Options) (string, error) {
	b, err := newUserspaceBackend(all, nil)
	if err != nil {
		return "", err
	}
	return "", b.RemovePolicyRoutes()
}

// sweepIPTables removes every proxy chain the mode does not own, in both
// families (a predecessor may have been dual-stack). A node without
// iptables, or without ip6tables, has nothing to sweep there.
func sweepIPTables(ctx context.Context, owned sweep.Owner) (string, error) {
	r, err := runner.New(runner.Options{})
	if err != nil {
		klog.V(2).InfoS("No iptables leftovers to check", "err", err)
		return "", nil
	}
	var parts []string
	var errs []error
	for _, fam := range []runner.Family{runner.IPv4, runner.IPv6} {
		res, err := sweep.Run(ctx, r, fam, owned)
		if errors.Is(err, runner.ErrFamilyUnavailable) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
		}
		if kept := res.Kept(); len(kept) > 0 {
			klog.InfoS("Kept leftover chains still entered from other chains", "family", fam, "chains", kept)
		}
		if res.Chains() > 0 || res.Jumps() > 0 {
			parts = append(parts, fmt.Sprintf("%s: %d chains, %d jumps (%s mode)", fam, res.Chains(), res.Jumps(), r.Mode()))
		}
	}
	return strings.Join(parts, "; "), errors.Join(errs...)
}

// removeIPVSLeftovers removes the ipvs mode's virtual servers, kube-ipvs0
// and sets, if that mode ever ran here: IPVS is loaded and kube-ipvs0
// exists. IPVS used by something else on a node that never ran the ipvs
// mode is left alone. Virtual servers that still carry connections stay
// (errInUse) until those end.
func removeIPVSLeftovers(ctx context.Context, all *Options) (string, error) {
	if !ipvsLoaded() {
		return "", nil
	}
	if _, err := netlink.LinkByName(ipvs.DummyInterface); err != nil {
		return "", nil
	}
	b, err := newIPVSBackend(all, nil)
	if err != nil {
		return "", err
	}
	kept, err := b.DrainKernelObjects(ctx)
	switch {
	case err != nil:
		return "", err
	case kept > 0:
		return "idle virtual servers and sets", fmt.Errorf("%d IPVS virtual servers (and %s): %w", kept, ipvs.DummyInterface, errInUse)
	}
	return "virtual servers, " + ipvs.DummyInterface + " and sets", nil
}

// withAllFamilies is o with both families, so that a backend built from
// it cleans both.
func withAllFamilies(o *Options) *Options {
	all := *o
	all.Families = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
	return &all
}
