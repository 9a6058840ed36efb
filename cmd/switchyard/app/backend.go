package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"k8s.io/klog/v2"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/vishvananda/netns"

	"github.com/switchyard-proxy/switchyard/backends/iptables"
	"github.com/switchyard-proxy/switchyard/backends/ipvs"
	"github.com/switchyard-proxy/switchyard/backends/nftables"
	"github.com/switchyard-proxy/switchyard/backends/userspace"
	"github.com/switchyard-proxy/switchyard/conntrack"
	"github.com/switchyard-proxy/switchyard/internal/nfacct"
	"github.com/switchyard-proxy/switchyard/proxier"
	"github.com/switchyard-proxy/switchyard/proxier/metrics"
)

// newBackend builds the dataplane backend of the chosen mode. Nothing is
// written to the kernel here: the first sync does that.
func newBackend(o *Options, m *metrics.Metrics, reg prometheus.Registerer) (proxier.Backend, error) {
	b, err := newModeBackend(o, m, reg)
	if err != nil {
		return nil, err
	}
	if err := registerServiceTraffic(o, b, reg); err != nil {
		return nil, err
	}
	return wrapLocalhostNodePorts(o, b, reg)
}

// registerServiceTraffic exports the backend's per-Service counters
// (--service-traffic-metrics); every mode's backend counts them when its
// Config asks (ServiceTraffic).
func registerServiceTraffic(o *Options, b proxier.Backend, reg prometheus.Registerer) error {
	if !o.ServiceTraffic || reg == nil {
		return nil
	}
	src, ok := b.(metrics.ServiceTrafficSource)
	if !ok {
		// The userspace relay does not count them yet.
		klog.InfoS("--service-traffic-metrics has no effect in this mode", "mode", o.Mode)
		return nil
	}
	return reg.Register(metrics.NewServiceTrafficCollector(src, 0))
}

// verifyInterval is every mode's check interval (reconcile.Cadence):
// repairs within one sync period of the mode even while changes keep
// postponing the periodic sync.
func verifyInterval(o *Options) time.Duration {
	_, maxSync := o.SyncPeriods()
	return proxier.CheckInterval(maxSync)
}

// newIPVSBackend programs kernel IPVS in this network namespace.
func newIPVSBackend(o *Options, reg prometheus.Registerer) (*ipvs.Backend, error) {
	k, err := ipvs.NewKernel("")
	if err != nil {
		return nil, err
	}
	bit := int32(o.MasqueradeBit)
	return ipvs.New(ipvs.Config{
		Kernel:            k,
		Families:          o.Families,
		Scheduler:         o.IPVS.Scheduler,
		LocalDetector:     o.LocalDetector,
		MasqueradeAll:     o.MasqueradeAll,
		MasqueradeBit:     &bit,
		NodePortAddresses: o.NodePortAddresses,
		StrictARP:         o.IPVS.StrictARP,
		ExcludeCIDRs:      o.IPVS.ExcludeCIDRs,
		TCPTimeout:        o.IPVS.TCPTimeout,
		TCPFinTimeout:     o.IPVS.TCPFinTimeout,
		UDPTimeout:        o.IPVS.UDPTimeout,
		Registerer:        reg,
		VerifyInterval:    verifyInterval(o),
	})
}

// newUserspaceBackend proxies in the daemon itself. Its conntrack table
// lets it clear UDP entries that would keep clients on a closed socket;
// its port reserver holds the NodePorts (not for --cleanup).
func newUserspaceBackend(o *Options, reg prometheus.Registerer) (*userspace.Backend, error) {
	r, err := iptablesRunner(o)
	if err != nil {
		return nil, err
	}
	routing, err := userspace.NewNetlinkRouting(netns.None())
	if err != nil {
		return nil, err
	}
	cfg := userspace.Config{
		Runner:            r,
		Families:          o.Families,
		LocalDetector:     o.LocalDetector,
		NodePortAddresses: o.NodePortAddresses,
		UDPIdleTimeout:    o.UDPIdleTimeout,
		UDPMaxSessions:    udpMaxSessions(o.UDPMaxSessions),
		Routing:           routing,
		MasqueradeBit:     int(o.MasqueradeBit),
		Transparent:       o.UserspaceTransparent,
		RestartFallback:   o.UserspaceFallback,
		// SIGTERM: connections being relayed get this long to finish
		// while new ones take the kernel fallback.
		ShutdownGrace:  2 * time.Second,
		VerifyInterval: verifyInterval(o),
		Registerer:     reg,
	}
	if reg != nil { // not for --cleanup
		table, err := conntrack.NewNetlinkTable(netns.None())
		if err != nil {
			return nil, fmt.Errorf("opening conntrack netlink: %w", err)
		}
		cfg.Conntrack = table
		// Hold the NodePorts, as upstream's userspace proxier did.
		cfg.PortReserver = userspace.HostPortReserver{}
	}
	return userspace.New(cfg)
}

// udpMaxSessions maps the flag (0: no cap) to userspace.Config (0:
// default, negative: no cap).
func udpMaxSessions(flag int) int {
	if flag == 0 {
		return -1
	}
	return flag
}

// newNFTablesBackend programs nf_tables over netlink in this network
// namespace (its own "kube-proxy" tables, nothing else).
func newNFTablesBackend(o *Options, reg prometheus.Registerer) (*nftables.Backend, error) {
	bit := int32(o.MasqueradeBit)
	return nftables.New(nftables.Config{
		Families:              o.Families,
		LocalDetector:         o.LocalDetector,
		MasqueradeAll:         o.MasqueradeAll,
		MasqueradeBit:         &bit,
		NodePortAddresses:     o.NodePortAddresses,
		ServiceTraffic:        o.ServiceTraffic,
		Conn:                  nftables.NewNetlinkConn(),
		MasqueradeTCPKeepPort: o.MasqueradeTCPKeepPort,
		Registerer:            reg,
		VerifyInterval:        verifyInterval(o),
	})
}

// newIPTablesBackend builds the iptables mode; reg is nil for --cleanup.
func newIPTablesBackend(o *Options, m *metrics.Metrics, reg prometheus.Registerer) (proxier.Backend, error) {
	r, err := iptablesRunner(o)
	if err != nil {
		return nil, err
	}
	bit := int32(o.MasqueradeBit)
	return iptables.New(iptables.Config{
		NFAcct:                reg != nil && ensureNFAcct(reg),
		ConntrackTCPLiberal:   o.Conntrack.TCPBeLiberal,
		Families:              o.Families,
		LocalDetector:         o.LocalDetector,
		MasqueradeAll:         o.MasqueradeAll,
		MasqueradeBit:         &bit,
		MasqueradeTCPKeepPort: o.MasqueradeTCPKeepPort,
		NodePortAddresses:     o.NodePortAddresses,
		LocalhostNodePorts:    localhostNodePorts(o),
		ServiceTraffic:        o.ServiceTraffic,
		CounterSets:           iptables.IPSetRunner{},
		Runner:                r,
		Metrics:               m,
		VerifyInterval:        verifyInterval(o),
		Registerer:            reg,
	})
}

// ensureNFAcct creates kube-proxy's two nfacct counters and registers
// their metrics. Without nfnetlink_acct in the kernel the rules go without
// counters and the metrics are absent, as in kube-proxy (logged).
func ensureNFAcct(reg prometheus.Registerer) bool {
	n, err := nfacct.New(netns.None())
	if err != nil {
		klog.ErrorS(err, "Failed to open nfacct; nfacct based metrics won't be available")
		return false
	}
	for _, name := range []string{nfacct.CTStateInvalidDropped, nfacct.LocalhostNodePortsAccepted} {
		if err := n.Ensure(name); err != nil {
			klog.ErrorS(err, "Failed to create nfacct counter; nfacct based metrics won't be available", "counter", name)
			n.Close()
			return false
		}
	}
	reg.MustRegister(nfacct.NewCollector(n))
	return true
}

// cleanupAll removes what any switchyard mode ever installed and returns
// (--cleanup). Every mode is cleaned even if one fails.
func cleanupAll(ctx context.Context, o *Options) error {
	var errs []error
	all := withAllFamilies(o)
	for i := range modes {
		if err := cleanupMode(ctx, &modes[i], all); err != nil {
			errs = append(errs, fmt.Errorf("%s cleanup: %w", modes[i].name, err))
		}
	}
	// Chains of kube-proxy's modes switchyard's do not create (its ipvs
	// mode's filter chains, KUBE-XLB-* of old releases).
	if removed, err := sweepIPTables(ctx, nil); err != nil {
		errs = append(errs, fmt.Errorf("iptables sweep: %w", err))
	} else if removed != "" {
		klog.InfoS("Removed other proxies' chains", "removed", removed)
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	klog.InfoS("Cleanup done")
	return nil
}

// cleanupAfterRollback removes what switchyard's nftables mode left in a
// table kube-proxy's nftables mode adopted (--cleanup-after-rollback).
func cleanupAfterRollback(ctx context.Context, o *Options) error {
	b, err := newNFTablesBackend(withAllFamilies(o), nil)
	if err != nil {
		return fmt.Errorf("nftables: %w", err)
	}
	removed, err := b.RemoveLeftovers(ctx)
	if len(removed) > 0 {
		klog.InfoS("Removed switchyard's objects from kube-proxy's tables", "removed", strings.Join(removed, "; "))
	} else if err == nil {
		klog.InfoS("Nothing of switchyard's left in kube-proxy's tables")
	}
	return err
}

// ipvsLoaded reports whether this network namespace has IPVS state
// (/proc/net/ip_vs appears once the ip_vs module is loaded).
func ipvsLoaded() bool {
	_, err := os.Stat("/proc/net/ip_vs")
	return err == nil
}

// postSyncHooks are run after every successful sync: memory of a full
// sync goes back to the OS; the conntrack reconciler removes stale UDP/SCTP
// entries in the NAT modes. The userspace mode NATs nothing through
// conntrack for services (its own sessions are reset by the proxy), so it
// runs without it. With --reset-vanished-endpoint-connections the
// vanished-endpoint reaper ends the connections the backend holds (relays,
// ipvs draining real servers) and, in the NAT modes, conntrack's.
func postSyncHooks(o *Options, m *metrics.Metrics, reg prometheus.Registerer, backend proxier.Backend) ([]proxier.PostSyncHook, error) {
	hooks := []proxier.PostSyncHook{newMemoryReleaser(), newTakeover(leftoverSteps(o))}
	var table *conntrack.NetlinkTable
	nat := specOf(o.Mode).conntrackNAT
	if nat {
		var err error
		if table, err = conntrack.NewNetlinkTable(netns.None()); err != nil {
			return nil, fmt.Errorf("opening conntrack netlink: %w", err)
		}
		// In the background: a pass over a big table must not hold back
		// the next sync (conntrack/background.go).
		hooks = append(hooks, conntrack.New(table, conntrack.Config{Families: o.Families, Background: true}, m))
	}
	if !o.ResetVanished {
		return hooks, nil
	}
	// ipvs: deleting conntrack entries does not move IPVS connections;
	// its backend ends them (draining real servers deleted at once).
	reaper, err := newVanishedReaper(o, reg, backend, nat)
	if err != nil {
		return nil, err
	}
	return append(hooks, reaper), nil
}

// newVanishedReaper builds the reaper: a conntrack table of its own in the
// NAT modes (it runs on its timer, beside the reconciler's passes), and
// the backend's relays.
func newVanishedReaper(o *Options, reg prometheus.Registerer, backend proxier.Backend, nat bool) (*conntrack.VanishedReaper, error) {
	cfg := conntrack.VanishedConfig{Families: o.Families, Grace: o.VanishedGrace, Registerer: reg}
	if e, ok := backend.(conntrack.ConnectionEnder); ok {
		cfg.Relays = []conntrack.ConnectionEnder{e}
	}
	var table conntrack.Table
	if nat {
		own, err := conntrack.NewNetlinkTable(netns.None())
		if err != nil {
			return nil, fmt.Errorf("opening conntrack netlink: %w", err)
		}
		table = own
	}
	klog.InfoS("Connections to endpoints that leave every EndpointSlice end after the grace period", "grace", o.VanishedGrace)
	return conntrack.NewVanishedReaper(table, cfg)
}
