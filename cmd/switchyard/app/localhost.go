package app

import (
	"context"
	"errors"
	"net/netip"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/switchyard-proxy/switchyard/backends/userspace"
	"github.com/switchyard-proxy/switchyard/proxier"
)

// localhostNodePortFamilies are the families whose loopback address
// serves NodePorts through the userspace relay (KEP-6032): a family the
// kernel rules cannot serve on loopback (nftables: none has
// route_localnet; iptables: IPv6), whose NodePort addresses name loopback
// explicitly ("localhost", 127.0.0.1/32, ::1/128; "all" keeps kube-proxy's
// meaning, every address but loopback). Setting the
// KubeProxyNFTablesLocalhostNodePorts gate to false turns it off, as it
// is off in kube-proxy without the gate. Call it after
// resolveNodePortAddresses.
func localhostNodePortFamilies(o *Options) []v1.IPFamily {
	if o.LocalhostRelayOff {
		return nil
	}
	var out []v1.IPFamily
	for _, f := range o.Families {
		if slices.Contains(specOf(o.Mode).relayFamilies, f) {
			if namesLoopback(o.NodePortAddresses, f) {
				out = append(out, f)
			}
		}
	}
	return out
}

// namesLoopback: some prefix of the family, other than a /0, holds its
// loopback address.
func namesLoopback(prefixes []netip.Prefix, f v1.IPFamily) bool {
	lo := netip.MustParseAddr("127.0.0.1")
	if f == v1.IPv6Protocol {
		lo = netip.IPv6Loopback()
	}
	return slices.ContainsFunc(prefixes, func(p netip.Prefix) bool { return p.Bits() > 0 && p.Contains(lo) })
}

// withLocalhostNodePorts runs the localhost NodePort relay beside a
// kernel mode: after each sync of the mode, with the same state, whether
// the kernel sync failed or not (the relay does not depend on the
// rules). A relay listener that cannot be opened is logged and counted
// by the relay, and never fails the sync.
type withLocalhostNodePorts struct {
	proxier.Backend
	relay *userspace.LocalhostNodePorts
}

func wrapLocalhostNodePorts(o *Options, b proxier.Backend, reg prometheus.Registerer) (proxier.Backend, error) {
	fams := localhostNodePortFamilies(o)
	if len(fams) == 0 {
		return b, nil
	}
	relay, err := userspace.NewLocalhostNodePorts(userspace.LocalhostConfig{Families: fams, Registerer: reg})
	if err != nil {
		return nil, err
	}
	klog.InfoS("Serving TCP NodePorts on loopback through the userspace relay", "families", fams)
	return &withLocalhostNodePorts{Backend: b, relay: relay}, nil
}

func (w *withLocalhostNodePorts) Sync(ctx context.Context, st *proxier.State, diff *proxier.Diff) (proxier.SyncResult, error) {
	res, err := w.Backend.Sync(ctx, st, diff)
	_ = w.relay.Sync(st, diff) // failures are logged and counted by the relay
	return res, err
}

// Close closes the relay, then the mode if it has anything to close.
func (w *withLocalhostNodePorts) Close() error {
	errs := []error{w.relay.Close()}
	if c, ok := w.Backend.(interface{ Close() error }); ok {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// EndConnectionsTo ends the relay's connections to the addresses, and the
// mode's if it relays too (conntrack.ConnectionEnder).
func (w *withLocalhostNodePorts) EndConnectionsTo(addrs []netip.Addr) int {
	n := w.relay.EndConnectionsTo(addrs)
	if e, ok := w.Backend.(interface{ EndConnectionsTo([]netip.Addr) int }); ok {
		n += e.EndConnectionsTo(addrs)
	}
	return n
}
