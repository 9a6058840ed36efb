package nftables

import (
	"context"
	"errors"
	"fmt"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/switchyard-proxy/switchyard/backends/nftables/ruleset"
	"github.com/switchyard-proxy/switchyard/internal/reconcile"
	"github.com/switchyard-proxy/switchyard/proxier"
)

// Backend is the nftables proxy mode.
type Backend struct {
	conn    Conn
	metrics *modeMetrics
	cadence reconcile.Cadence
	repairs *reconcile.Repairs

	mu       sync.Mutex // serialises Sync and Cleanup
	families []*familySync
}

var _ proxier.Backend = (*Backend)(nil)

// New builds the backend. It does not touch the kernel: the first Sync
// writes everything.
func New(cfg Config) (*Backend, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	repairs, err := reconcile.NewRepairs(cfg.Registerer, "nftables", cfg.families())
	if err != nil {
		return nil, err
	}
	b := &Backend{conn: cfg.Conn, metrics: newModeMetrics(cfg.Registerer),
		cadence: reconcile.NewCadence(cfg.VerifyInterval, cfg.Clock), repairs: repairs}
	for _, fam := range cfg.families() {
		b.families = append(b.families, newFamilySync(cfg.forFamily(fam)))
	}
	return b, nil
}

// Name is the proxy mode.
func (b *Backend) Name() string { return "nftables" }

// Sync writes the state, family by family: fully on the first sync, when
// asked, after a failure or when a check finds the table changed behind
// its back; otherwise only the service ports the diff names.
func (b *Backend) Sync(ctx context.Context, st *proxier.State, diff *proxier.Diff) (proxier.SyncResult, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var res proxier.SyncResult
	var errs []error
	for _, f := range b.families {
		r, err := f.sync(ctx, b.conn, b.cadence, st, diff)
		res.Full = res.Full || r.full
		if err != nil {
			b.metrics.syncFailures.Inc()
			errs = append(errs, fmt.Errorf("nftables %s: %w", f.fc.nft, err))
			continue
		}
		if r.repaired {
			b.repairs.Record(reconcile.KindNFTables, f.fc.family)
		}
		b.metrics.record(r)
		klog.V(2).InfoS("nftables sync done", "family", f.fc.nft, "full", r.full,
			"rulesWritten", r.rules, "elementsAdded", r.added, "elementsDeleted", r.deleted)
	}
	return res, errors.Join(errs...)
}

// Cleanup deletes the kube-proxy table of every configured family; a
// family without one is fine. Nothing outside those tables is touched.
func (b *Backend) Cleanup(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	var errs []error
	for _, f := range b.families {
		if _, err := cleanupFamily(ctx, b.conn, f.fc.nft); err != nil {
			b.metrics.cleanupFailures.Inc()
			errs = append(errs, err)
		}
		f.reset()
	}
	return errors.Join(errs...)
}

// RemoveTables is Cleanup that also says which tables existed ("ip
// kube-proxy"): a mode taking over from nftables reports them.
func (b *Backend) RemoveTables(ctx context.Context) ([]string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var removed []string
	var errs []error
	for _, f := range b.families {
		existed, err := cleanupFamily(ctx, b.conn, f.fc.nft)
		if err != nil {
			errs = append(errs, err)
		} else if existed {
			removed = append(removed, fmt.Sprintf("%s %s", f.fc.nft, TableName))
		}
		f.reset()
	}
	return removed, errors.Join(errs...)
}

func cleanupFamily(ctx context.Context, conn Conn, fam ruleset.Family) (existed bool, err error) {
	if _, err := cleanupTable(ctx, conn, fam, HandoverTable); err != nil {
		return false, err
	}
	return cleanupTable(ctx, conn, fam, TableName)
}

// cleanupTable deletes one table if it exists.
func cleanupTable(ctx context.Context, conn Conn, fam ruleset.Family, table string) (existed bool, err error) {
	_, exists, err := conn.ListObjects(ctx, fam, table)
	if err != nil {
		return false, fmt.Errorf("nftables cleanup: listing table %s %s: %w", fam, table, err)
	}
	if !exists {
		return false, nil
	}
	tx := ruleset.NewTransaction(fam, table)
	tx.DeleteTable()
	if err := conn.Run(ctx, tx); err != nil {
		return true, fmt.Errorf("nftables cleanup: deleting table %s %s: %w", fam, table, err)
	}
	return true, nil
}

// FamilyOf maps a Kubernetes IP family to its nf_tables family.
func FamilyOf(f v1.IPFamily) ruleset.Family {
	if f == v1.IPv6Protocol {
		return ruleset.IPv6
	}
	return ruleset.IPv4
}

// RemoveLeftovers deletes, from a kube-proxy table that kube-proxy's
// nftables mode adopted on a rollback, what only switchyard writes (no
// hook reaches it after the adoption), and any handover table; nothing of
// kube-proxy's. It refuses a table holding nothing of another program's:
// switchyard still owns that one. It returns what it removed per family.
func (b *Backend) RemoveLeftovers(ctx context.Context) ([]string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var removed []string
	var errs []error
	for _, f := range b.families {
		msg, err := removeLeftovers(ctx, b.conn, f.fc.nft)
		if err != nil {
			errs = append(errs, err)
		} else if msg != "" {
			removed = append(removed, msg)
		}
	}
	return removed, errors.Join(errs...)
}

func removeLeftovers(ctx context.Context, conn Conn, fam ruleset.Family) (string, error) {
	if _, err := cleanupTable(ctx, conn, fam, HandoverTable); err != nil {
		return "", err
	}
	objs, exists, err := conn.ListObjects(ctx, fam, TableName)
	if err != nil || !exists {
		return "", err
	}
	if !objs.Foreign && !holdsForeignObjects(objs) {
		return "", fmt.Errorf("table %s %s holds only switchyard's objects: switchyard still owns it (use --cleanup to remove it)", fam, TableName)
	}
	tx := ruleset.NewTransaction(fam, TableName)
	chains, sets := 0, 0
	for _, c := range objs.Chains {
		if SwitchyardObject(c) {
			tx.FlushChain(c)
			chains++
		}
	}
	for _, c := range objs.Chains {
		if SwitchyardObject(c) {
			tx.DeleteChain(c)
		}
	}
	for _, s := range objs.Sets {
		if SwitchyardObject(s) {
			tx.DeleteSet(s)
			sets++
		}
	}
	if chains+sets == 0 {
		return "", nil
	}
	if err := conn.Run(ctx, tx); err != nil {
		return "", fmt.Errorf("removing switchyard's objects from table %s %s (has kube-proxy synced since it started?): %w", fam, TableName, err)
	}
	return fmt.Sprintf("%s %s: %d chains, %d sets", fam, TableName, chains, sets), nil
}
