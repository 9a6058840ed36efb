package app

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/component-base/featuregate"
	"k8s.io/klog/v2"

	"github.com/switchyard-proxy/switchyard/backends/iptables"
	"github.com/switchyard-proxy/switchyard/backends/ipvs"
	"github.com/switchyard-proxy/switchyard/backends/userspace"
	"github.com/switchyard-proxy/switchyard/internal/explain"
	"github.com/switchyard-proxy/switchyard/internal/iptables/sweep"
	"github.com/switchyard-proxy/switchyard/proxier"
	"github.com/switchyard-proxy/switchyard/proxier/metrics"
)

// Mode is the dataplane backend the daemon programs.
type Mode string

// The proxy modes, as --proxy-mode names them.
const (
	ModeIPTables  Mode = "iptables"
	ModeIPVS      Mode = "ipvs"
	ModeNFTables  Mode = "nftables"
	ModeUserspace Mode = "userspace"
)

// defaultMode is --proxy-mode's default, as kube-proxy's on Linux.
const defaultMode = ModeIPTables

// modeSpec is what the daemon knows of one proxy mode. Adding a mode is
// adding an entry to modes: the rest of this package asks the entry.
type modeSpec struct {
	name Mode
	// backend builds the mode's own backend. Nothing is written to the
	// kernel until its first sync; m and reg are nil for --cleanup and
	// the takeover's leftover steps.
	backend func(o *Options, m *metrics.Metrics, reg prometheus.Registerer) (proxier.Backend, error)
	// cleanup removes everything the mode installs (--cleanup); all has
	// both families. Nil: the backend's Cleanup.
	cleanup func(ctx context.Context, all *Options) error
	// leftovers removes the mode's kernel state, other than iptables
	// chains (swept by ownership), when another mode runs; it says what
	// it removed. Nil: nothing beyond chains.
	leftovers func(ctx context.Context, all *Options) (string, error)
	// ownsChain names the iptables chains the mode writes itself, which
	// the takeover's sweep keeps. Nil: none.
	ownsChain sweep.Owner
	// usesIPTables: the mode writes iptables rules, so a family needs its
	// iptables tools.
	usesIPTables bool
	// conntrackNAT: services are NATed through conntrack (the stale
	// entry reconciler runs, vanished endpoints' entries are deleted).
	conntrackNAT bool
	// relayFamilies: families whose loopback NodePorts the localhost
	// relay serves when the NodePort addresses name loopback.
	relayFamilies []v1.IPFamily
	// routeLocalnet: IPv4 localhost NodePorts are served in the kernel
	// with route_localnet (--iptables-localhost-nodeports).
	routeLocalnet bool
	// localhostNodePortDefault: unset --nodeport-addresses means
	// "primary" plus 127.0.0.1/32 (KEP-6032); otherwise every local
	// address but loopback.
	localhostNodePortDefault bool
	// section is the KubeProxyConfiguration section holding the mode's
	// own settings (sync periods among them).
	section string
	// ownsFlag: the flag configures this mode only (warned about in the
	// others).
	ownsFlag func(flag string) bool
	// gate, when set, is the feature gate that must be on for the mode.
	gate featuregate.Feature
	// explain reads the mode's live dataplane for `switchyard explain`
	// (nil: not supported).
	explain func(ctx context.Context, o *Options, fams []v1.IPFamily, local []netip.Addr) (explain.Dataplane, error)
}

var both = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}

// modes, in the order --cleanup and the takeover handle them: iptables
// chains first (the ipvs mode's rules use its sets), then IPVS state, then
// the nftables tables, then userspace's policy routing. (Set in init: the
// constructors consult the table.)
var modes []modeSpec

func init() { modes = modeTable() }

func modeTable() []modeSpec {
	return []modeSpec{
		{
			name: ModeIPTables, backend: newIPTablesBackend,
			ownsChain: iptables.OwnsChain, usesIPTables: true, conntrackNAT: true,
			relayFamilies: []v1.IPFamily{v1.IPv6Protocol}, routeLocalnet: true,
			section: "iptables", explain: openIPTablesMode,
		},
		{
			name: ModeIPVS, backend: newIPVSModeBackend, cleanup: cleanupIPVS, leftovers: removeIPVSLeftovers,
			ownsChain: ipvs.OwnsChain, usesIPTables: true, gate: featureKubeProxyIPVS,
			section: "ipvs", ownsFlag: func(f string) bool { return strings.HasPrefix(f, "ipvs-") }, explain: openIPVS,
		},
		{
			name: ModeNFTables, backend: newNFTablesModeBackend, leftovers: removeNFTablesLeftovers,
			conntrackNAT: true, relayFamilies: both, localhostNodePortDefault: true,
			section: "nftables", explain: openNFTables,
		},
		{
			name: ModeUserspace, backend: newUserspaceModeBackend, leftovers: removeUserspaceLeftovers,
			ownsChain: userspace.OwnsChain, usesIPTables: true,
			section: "iptables", ownsFlag: userspaceOnly, explain: openUserspace,
		},
	}
}

// specOf is the mode's entry; the options were validated, so it exists.
func specOf(m Mode) *modeSpec {
	for i := range modes {
		if modes[i].name == m {
			return &modes[i]
		}
	}
	return nil
}

// modeNames lists the modes for messages: "iptables, ipvs, nftables, userspace".
func modeNames() string {
	var names []string
	for _, s := range modes {
		names = append(names, string(s.name))
	}
	return strings.Join(names, ", ")
}

// syncPeriods are the mode's minimum and maximum sync intervals: its
// section's, with the userspace mode on the iptables periods as upstream's
// userspace proxier was (nftables' section is merged into them).
func (s *modeSpec) syncPeriods(o *Options) (minPeriod, maxPeriod time.Duration) {
	if s.section == "ipvs" {
		return o.IPVS.MinSyncPeriod, o.IPVS.SyncPeriod
	}
	return o.IPTables.MinSyncPeriod, o.IPTables.SyncPeriod
}

// newModeBackend builds the mode's own backend.
func newModeBackend(o *Options, m *metrics.Metrics, reg prometheus.Registerer) (proxier.Backend, error) {
	s := specOf(o.Mode)
	if s == nil {
		return nil, fmt.Errorf("unknown proxy mode %q", o.Mode)
	}
	return s.backend(o, m, reg)
}

// cleanupMode removes what one mode installed, in both families.
func cleanupMode(ctx context.Context, s *modeSpec, all *Options) error {
	if s.cleanup != nil {
		return s.cleanup(ctx, all)
	}
	b, err := s.backend(all, nil, nil)
	if err != nil {
		return err
	}
	c, ok := b.(interface{ Cleanup(context.Context) error })
	if !ok {
		return fmt.Errorf("%s mode has no cleanup", s.name)
	}
	return c.Cleanup(ctx)
}

// cleanupIPVS is the ipvs mode's --cleanup: nothing when IPVS never ran
// in this network namespace (no virtual services, and no kube-ipvs0 or
// ipsets of ours either).
func cleanupIPVS(ctx context.Context, all *Options) error {
	if !ipvsLoaded() {
		klog.V(2).InfoS("Skipping IPVS cleanup: IPVS is not loaded")
		return nil
	}
	b, err := newIPVSBackend(all, nil)
	if err != nil {
		return err
	}
	return b.Cleanup(ctx)
}

// The backends' constructors as modeSpec.backend.

// (No typed nil in the interface on failure.)

func newIPVSModeBackend(o *Options, _ *metrics.Metrics, reg prometheus.Registerer) (proxier.Backend, error) {
	b, err := newIPVSBackend(o, reg)
	if err != nil {
		return nil, err
	}
	return b, nil
}

func newNFTablesModeBackend(o *Options, _ *metrics.Metrics, reg prometheus.Registerer) (proxier.Backend, error) {
	b, err := newNFTablesBackend(o, reg)
	if err != nil {
		return nil, err
	}
	return b, nil
}

func newUserspaceModeBackend(o *Options, _ *metrics.Metrics, reg prometheus.Registerer) (proxier.Backend, error) {
	b, err := newUserspaceBackend(o, reg)
	if err != nil {
		return nil, err
	}
	return b, nil
}

// userspaceOnly: the flag configures the userspace mode only.
func userspaceOnly(flag string) bool {
	return flag == "udp-timeout" || flag == "userspace-transparent" || flag == "userspace-restart-fallback"
}

// flagOwner is the mode a flag configures alone, or "".
func flagOwner(flag string) Mode {
	for _, s := range modes {
		if s.ownsFlag != nil && s.ownsFlag(flag) {
			return s.name
		}
	}
	return ""
}

// flagSection is the configuration section of a --proxy-mode value ("" for
// an unknown one).
func flagSection(mode string) string {
	if s := specOf(Mode(mode)); s != nil {
		return s.section
	}
	return ""
}
