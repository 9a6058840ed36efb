package proxier

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// LocalMode is kube-proxy's detectLocalMode (--detect-local-mode): how
// traffic from pods ("local" traffic) is told from the rest. Every mode
// renders the same decision: traffic to a cluster IP that is not local is
// masqueraded, and local traffic to an external destination of a service
// with externalTrafficPolicy Local is short-circuited to all endpoints.
type LocalMode string

// The detectLocalMode values of kube-proxy v1.37.
const (
	// LocalModeClusterCIDR: the source address is in the cluster CIDR of
	// its family (--cluster-cidr). The default.
	LocalModeClusterCIDR LocalMode = "ClusterCIDR"
	// LocalModeNodeCIDR: the source address is in this node's pod CIDR of
	// its family (Node spec.podCIDRs).
	LocalModeNodeCIDR LocalMode = "NodeCIDR"
	// LocalModeBridgeInterface: the packet came in on the pod bridge
	// (--pod-bridge-interface).
	LocalModeBridgeInterface LocalMode = "BridgeInterface"
	// LocalModeInterfaceNamePrefix: the packet came in on an interface
	// whose name starts with the prefix (--pod-interface-name-prefix),
	// the per-pod veths of routed CNIs such as Calico ("cali").
	LocalModeInterfaceNamePrefix LocalMode = "InterfaceNamePrefix"
)

// LocalModes lists the valid modes, in kube-proxy's order.
func LocalModes() []LocalMode {
	return []LocalMode{LocalModeClusterCIDR, LocalModeNodeCIDR, LocalModeBridgeInterface, LocalModeInterfaceNamePrefix}
}

// ifNameMax is the longest interface name Linux allows (IFNAMSIZ - 1).
const ifNameMax = 15

// LocalDetector is the configured local-traffic decision, the same for
// every backend. The zero value is ClusterCIDR mode without a cluster
// CIDR: nothing is local, as kube-proxy's no-op detector.
type LocalDetector struct {
	Mode LocalMode
	// ClusterCIDRs are used in ClusterCIDR mode: the first of each family.
	ClusterCIDRs []netip.Prefix
	// Interface is the bridge name (BridgeInterface) or the interface
	// name prefix (InterfaceNamePrefix).
	Interface string
}

// DetectByClusterCIDRs is ClusterCIDR mode with these CIDRs.
func DetectByClusterCIDRs(cidrs ...netip.Prefix) LocalDetector {
	return LocalDetector{Mode: LocalModeClusterCIDR, ClusterCIDRs: cidrs}
}

// DetectByNodeCIDR is NodeCIDR mode.
func DetectByNodeCIDR() LocalDetector { return LocalDetector{Mode: LocalModeNodeCIDR} }

// DetectByBridge is BridgeInterface mode with this bridge.
func DetectByBridge(name string) LocalDetector {
	return LocalDetector{Mode: LocalModeBridgeInterface, Interface: name}
}

// DetectByInterfacePrefix is InterfaceNamePrefix mode with this prefix.
func DetectByInterfacePrefix(prefix string) LocalDetector {
	return LocalDetector{Mode: LocalModeInterfaceNamePrefix, Interface: prefix}
}

// mode is Mode with kube-proxy's defaulting: empty means ClusterCIDR.
func (d LocalDetector) mode() LocalMode {
	if d.Mode == "" {
		return LocalModeClusterCIDR
	}
	return d.Mode
}

// Validate checks the detector as kube-proxy's validation does (a known
// mode; a non-empty bridge or prefix in the interface modes), and that an
// interface name could exist on Linux, since iptables and nftables refuse
// rules naming one that cannot.
func (d LocalDetector) Validate() error {
	switch d.mode() {
	case LocalModeClusterCIDR, LocalModeNodeCIDR:
		return nil
	case LocalModeBridgeInterface:
		return ValidateInterfaceName(d.Interface, false)
	case LocalModeInterfaceNamePrefix:
		return ValidateInterfaceName(d.Interface, true)
	}
	return fmt.Errorf("unknown local-traffic detection mode %q", d.Mode)
}

// ValidateInterfaceName checks a bridge name or, with prefix set, an
// interface name prefix. iptables appends "+" to a prefix, and the result
// must still fit IFNAMSIZ, so a prefix is one character shorter.
func ValidateInterfaceName(name string, prefix bool) error {
	limit := ifNameMax
	if prefix {
		limit--
	}
	switch {
	case name == "":
		return errors.New("must not be empty")
	case len(name) > limit:
		return fmt.Errorf("must be at most %d characters", limit)
	case strings.ContainsAny(name, "/: \t\n\"'+*"):
		return errors.New(`must not contain '/', ':', quotes, '+', '*' or whitespace`)
	}
	return nil
}

// String describes the detector for logs.
func (d LocalDetector) String() string {
	switch d.mode() {
	case LocalModeClusterCIDR:
		return fmt.Sprintf("ClusterCIDR %v", d.ClusterCIDRs)
	case LocalModeBridgeInterface, LocalModeInterfaceNamePrefix:
		return fmt.Sprintf("%s %q", d.mode(), d.Interface)
	}
	return string(d.mode())
}

// NeedsNodePodCIDRs reports whether the detector reads the node's pod
// CIDRs (NodeCIDR mode): kube-proxy waits for them at start.
func (d LocalDetector) NeedsNodePodCIDRs() bool { return d.mode() == LocalModeNodeCIDR }

// LocalMatch is the detector resolved for one IP family and the node: what
// a backend renders. Exactly one of CIDR and Interface is set, or neither
// (nothing is local).
type LocalMatch struct {
	// CIDR: local when the source address is inside.
	CIDR netip.Prefix
	// Interface: local when the packet came in on this interface or, with
	// Prefix, on one whose name starts with it.
	Interface string
	Prefix    bool
}

// Match resolves the detector for a family. As kube-proxy, which builds
// one detector per family: ClusterCIDR and NodeCIDR take the first CIDR of
// the family, and a family without one detects nothing (then cluster-IP
// traffic is not masqueraded by source and nothing is short-circuited);
// the interface modes are the same for both families.
func (d LocalDetector) Match(family v1.IPFamily, node NodeInfo) LocalMatch {
	switch d.mode() {
	case LocalModeClusterCIDR:
		return LocalMatch{CIDR: firstOfFamily(d.ClusterCIDRs, family)}
	case LocalModeNodeCIDR:
		return LocalMatch{CIDR: firstOfFamily(node.PodCIDRs, family)}
	case LocalModeBridgeInterface:
		return LocalMatch{Interface: d.Interface}
	case LocalModeInterfaceNamePrefix:
		return LocalMatch{Interface: d.Interface, Prefix: true}
	}
	return LocalMatch{}
}

func firstOfFamily(ps []netip.Prefix, family v1.IPFamily) netip.Prefix {
	for _, p := range ps {
		if p.IsValid() && FamilyOfPrefix(p) == family {
			return p.Masked()
		}
	}
	return netip.Prefix{}
}

// IsImplemented reports whether the match detects anything (kube-proxy's
// LocalTrafficDetector.IsImplemented): when false, backends write neither
// the masquerade rule for non-local cluster-IP traffic nor the pod
// short-circuit.
func (m LocalMatch) IsImplemented() bool { return m.CIDR.IsValid() || m.Interface != "" }

// ByInterface reports whether the match is on the input interface.
func (m LocalMatch) ByInterface() bool { return m.Interface != "" }

// IsLocal reports whether a packet from src that came in on iif ("" for
// one the node itself sends) is local traffic.
func (m LocalMatch) IsLocal(src netip.Addr, iif string) bool {
	switch {
	case m.CIDR.IsValid():
		return m.CIDR.Contains(src.Unmap())
	case m.Interface == "" || iif == "":
		return false
	case m.Prefix:
		return strings.HasPrefix(iif, m.Interface)
	}
	return iif == m.Interface
}

// String describes the match for logs and comments.
func (m LocalMatch) String() string {
	switch {
	case m.CIDR.IsValid():
		return "source " + m.CIDR.String()
	case m.Prefix:
		return "input interface " + m.Interface + "*"
	case m.Interface != "":
		return "input interface " + m.Interface
	}
	return "none"
}
