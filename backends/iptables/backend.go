package iptables

import (
	"context"
	"errors"
	"fmt"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
	"github.com/switchyard-proxy/switchyard/internal/reconcile"
	"github.com/switchyard-proxy/switchyard/proxier"
	"github.com/switchyard-proxy/switchyard/proxier/metrics"
)

// Backend is the iptables proxy mode: kube-proxy's rules, written with
// bounded iptables-restore transactions and partial syncs that send only
// what changed.
type Backend struct {
	runner  runner.Interface
	metrics *metrics.Metrics
	// chunkRules bounds a transaction; 0 means one transaction.
	chunkRules int
	verify     reconcile.Cadence
	repairs    *reconcile.Repairs

	mu       sync.Mutex // serialises Sync and Cleanup
	families []*familySync
	// counterSets reach the per-Service counter ipsets, which Cleanup
	// destroys whether or not this run counts (nil: none).
	counterSets CounterSets
}

var _ proxier.Backend = (*Backend)(nil)

// New builds the backend. It does not touch iptables: the first Sync
// writes everything.
func New(cfg Config) (*Backend, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	repairs, err := reconcile.NewRepairs(cfg.Registerer, "iptables", cfg.families())
	if err != nil {
		return nil, err
	}
	b := &Backend{runner: cfg.Runner, metrics: cfg.Metrics, chunkRules: cfg.chunkRules(),
		verify: reconcile.NewCadence(cfg.VerifyInterval, cfg.Clock), repairs: repairs, counterSets: cfg.CounterSets}
	if cfg.Runner.Mode() == runner.ModeLegacy {
		// Legacy iptables rewrites the whole table on every commit:
		// chunking would multiply that cost.
		b.chunkRules = 0
	}
	for _, fam := range cfg.families() {
		f := newFamilySync(runnerFamily(fam), cfg.forFamily(fam))
		if cfg.ServiceTraffic {
			f.counters = &counterSetsSync{sets: cfg.CounterSets, fam: fam}
		}
		b.families = append(b.families, f)
	}
	return b, nil
}

// Name is the proxy mode.
func (b *Backend) Name() string { return "iptables" }

// Sync renders state and applies it, family by family. A family that
// fails does not stop the other; the error names it and the next sync of
// that family is full. Rules in force stay valid throughout.
func (b *Backend) Sync(ctx context.Context, state *proxier.State, diff *proxier.Diff) (proxier.SyncResult, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var res proxier.SyncResult
	written := make([]map[table]int, len(b.families))
	full := make([]bool, len(b.families))
	var errs []error
	b.checkFingerprints(ctx)
	for i, f := range b.families {
		if f.counters != nil {
			// Before the rules that name the sets.
			if err := f.counters.sync(ctx, state, diff); err != nil {
				errs = append(errs, fmt.Errorf("iptables %s: %w", f.fam, err))
				continue
			}
		}
		out, err := f.sync(ctx, b, state, diff)
		res.Full = res.Full || out.full
		written[i], full[i] = out.written, out.full
		if err != nil {
			errs = append(errs, err)
		} else if f.damaged {
			b.repairs.Record(reconcile.KindIPTables, f.fc.family)
		}
	}
	if err := errors.Join(errs...); err != nil {
		for _, f := range b.families {
			f.fp.stamp = reconcile.Stamp{}
		}
		return res, err
	}
	b.recordFingerprints(ctx, full)
	for i, f := range b.families {
		if full[i] {
			learnUses(ctx, b.runner, f.fam, f.fp.stamp, f.installed)
		}
	}
	b.reportRules(written)
	return res, nil
}

// checkFingerprints marks, before any family writes, the families whose
// rules nobody else touched since the last sync (with iptables-nft the
// generation is shared by both families, so it must be read before
// either writes).
func (b *Backend) checkFingerprints(ctx context.Context) {
	for _, f := range b.families {
		f.fp.begin(readFingerprint(ctx, b.runner, f.fam))
	}
}

// recordFingerprints notes the kernel's fingerprints after a successful
// sync of every family (full tells which rewrote everything), by
// reconcile.Stamp's rule: kept only when the sync knows the kernel holds
// what it wrote.
func (b *Backend) recordFingerprints(ctx context.Context, full []bool) {
	for i, f := range b.families {
		known := f.fp.known(full[i])
		var fp uint64
		ok := false
		if known {
			fp, ok = readFingerprint(ctx, b.runner, f.fam)
		}
		f.fp.stamp.Record(fp, ok, known)
	}
}

// reportRules sets the rule-count gauges of each family after a
// successful sync.
func (b *Backend) reportRules(written []map[table]int) {
	for i, f := range b.families {
		klog.V(2).InfoS("iptables sync done", "family", f.fc.family,
			"natRulesWritten", written[i][tableNAT], "filterRulesWritten", written[i][tableFilter])
		if b.metrics == nil {
			continue
		}
		fam := metrics.Family(f.fc.family)
		for _, t := range []table{tableFilter, tableNAT} {
			b.metrics.IPTablesRulesTotal.WithLabelValues(metricTable(t), fam).Set(float64(f.installed.rules[t]))
			b.metrics.IPTablesRulesLastSync.WithLabelValues(metricTable(t), fam).Set(float64(written[i][t]))
		}
	}
}

func (b *Backend) countRestoreFailure(family v1.IPFamily, partial bool) {
	if b.metrics == nil {
		return
	}
	fam := metrics.Family(family)
	b.metrics.IPTablesRestoreFailuresTotal.WithLabelValues(fam).Inc()
	if partial {
		b.metrics.IPTablesPartialRestoreFailuresTotal.WithLabelValues(fam).Inc()
	}
}

func metricTable(t table) string {
	if t == tableNAT {
		return metrics.TableNAT
	}
	return metrics.TableFilter
}

func runnerFamily(f v1.IPFamily) runner.Family {
	if f == v1.IPv6Protocol {
		return runner.IPv6
	}
	return runner.IPv4
}

// Cleanup removes the jumps from the built-in chains and every chain this
// mode creates (and kube-proxy's chains of the same names), in every
// configured family; other programs' chains and rules stay. It lists
// chains with iptables-save: it is not on the hot path.
func (b *Backend) Cleanup(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	var errs []error
	for _, f := range b.families {
		if err := f.cleanup(ctx, b); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// ServiceTraffic implements metrics.ServiceTrafficSource: `ipset save` of
// each counter set, read now.
func (b *Backend) ServiceTraffic(ctx context.Context) ([]metrics.ServiceTrafficSample, error) {
	var out []metrics.ServiceTrafficSample
	for _, f := range b.families {
		if f.counters == nil {
			continue
		}
		var err error
		if out, err = f.counters.samples(ctx, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}
