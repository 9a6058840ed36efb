package framework

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// nodeSysctls are set inside the node namespace: it routes between the client
// network and the pod bridge, and bridged pod-to-pod replies must pass
// iptables so conntrack can undo a Service DNAT (what br_netfilter does for
// kube-proxy on a real node). route_localnet is left to the daemon, which
// owns that decision as kube-proxy does. With IPv6 the same holds for
// ip6tables, and the node forwards IPv6 too.
func nodeSysctls(s Shape) []string {
	out := []string{
		"net.ipv4.ip_forward=1",
		"net.bridge.bridge-nf-call-iptables=1",
	}
	if s.HasIPv6() {
		out = append(out, "net.ipv6.conf.all.forwarding=1", "net.bridge.bridge-nf-call-ip6tables=1")
	}
	return out
}

// noDADSysctls turn off IPv6 duplicate address detection in a namespace
// before its links exist (they copy "default"), so every address, link-local
// ones included, is usable at once instead of tentative for a second or
// more. The global addresses are also added with `nodad`.
var noDADSysctls = []string{"net.ipv6.conf.all.accept_dad=0", "net.ipv6.conf.default.accept_dad=0"}

// SetupCommands returns, in order, the argv of every command that builds the
// topology. Every command acts inside one of the topology's namespaces (`ip
// -n`, `ip netns exec`) except the `ip netns add` calls that create them.
func (t *Topology) SetupCommands() [][]string {
	var cmds [][]string
	for _, ns := range t.Namespaces() {
		cmds = append(cmds, []string{"ip", "netns", "add", ns}, ipn(ns, "link", "set", "lo", "up"))
		if t.Shape.HasIPv6() {
			for _, s := range noDADSysctls {
				cmds = append(cmds, sysctlIn(ns, s))
			}
		}
	}
	for _, s := range nodeSysctls(t.Shape) {
		cmds = append(cmds, sysctlIn(t.NodeNS, s))
	}
	cmds = append(cmds, t.bridgeCommands()...)
	for i, p := range t.Pods {
		cmds = append(cmds, t.podCommands(i, p)...)
	}
	return append(cmds, t.clientCommands()...)
}

func (t *Topology) bridgeCommands() [][]string {
	cmds := [][]string{ipn(t.NodeNS, "link", "add", bridgeName, "type", "bridge")}
	for _, n := range t.Nets {
		cmds = append(cmds, addrAdd(t.NodeNS, n.Family, n.BridgeIP, n.PodCIDR, bridgeName))
	}
	return append(cmds, ipn(t.NodeNS, "link", "set", bridgeName, "up"))
}

// podCommands creates the pod's veth in the node namespace with its peer
// moved straight into the pod namespace, so nothing is ever created in the
// host namespace. Hairpin mode lets a pod reach itself through a Service.
func (t *Topology) podCommands(i int, p Pod) [][]string {
	nodeEnd := fmt.Sprintf("veth-pod%d", i)
	cmds := [][]string{
		ipn(t.NodeNS, "link", "add", nodeEnd, "type", "veth", "peer", "name", podIfName, "netns", p.NS),
		ipn(t.NodeNS, "link", "set", nodeEnd, "master", bridgeName),
		ipn(t.NodeNS, "link", "set", nodeEnd, "type", "bridge_slave", "hairpin", "on"),
		ipn(t.NodeNS, "link", "set", nodeEnd, "up"),
	}
	for j, n := range t.Nets {
		cmds = append(cmds, addrAdd(p.NS, n.Family, p.IPs[j], n.PodCIDR, podIfName))
	}
	cmds = append(cmds, ipn(p.NS, "link", "set", podIfName, "up"))
	for _, n := range t.Nets {
		cmds = append(cmds, defaultRoute(p.NS, n.Family, n.BridgeIP))
	}
	return cmds
}

// clientCommands connects the client namespace to the node on the external
// network; its default route is the node, so Service, pod, NodePort and
// external IPs are all reached through the node's rules.
func (t *Topology) clientCommands() [][]string {
	cmds := [][]string{ipn(t.NodeNS, "link", "add", nodeClientVeth, "type", "veth", "peer", "name", podIfName, "netns", t.ClientNS)}
	for _, n := range t.Nets {
		cmds = append(cmds, addrAdd(t.NodeNS, n.Family, n.NodeIP, n.ExtCIDR, nodeClientVeth))
	}
	cmds = append(cmds, ipn(t.NodeNS, "link", "set", nodeClientVeth, "up"))
	for _, n := range t.Nets {
		cmds = append(cmds, addrAdd(t.ClientNS, n.Family, n.ClientIP, n.ExtCIDR, podIfName))
	}
	cmds = append(cmds, ipn(t.ClientNS, "link", "set", podIfName, "up"))
	for _, n := range t.Nets {
		cmds = append(cmds,
			defaultRoute(t.ClientNS, n.Family, n.NodeIP),
			// Like a real node, the node has a default gateway (here
			// the client): traffic to a service IP without rules is
			// forwarded, not dropped for lack of a route, so it
			// passes the FORWARD chain.
			defaultRoute(t.NodeNS, n.Family, n.ClientIP))
	}
	return cmds
}

// TeardownCommands deletes every namespace; the veths and the bridge go with
// them. Pods first, node last.
func (t *Topology) TeardownCommands() [][]string {
	ns := t.Namespaces()
	cmds := make([][]string, 0, len(ns))
	for i := len(ns) - 1; i >= 0; i-- {
		cmds = append(cmds, []string{"ip", "netns", "del", ns[i]})
	}
	return cmds
}

func ipn(ns string, args ...string) []string {
	return append([]string{"ip", "-n", ns}, args...)
}

func sysctlIn(ns, setting string) []string {
	return []string{"ip", "netns", "exec", ns, "sysctl", "-q", "-w", setting}
}

// addrAdd adds ip (with cidr's prefix length) to dev; IPv6 addresses skip
// duplicate address detection.
func addrAdd(ns string, f corev1.IPFamily, ip, cidr, dev string) []string {
	argv := ipn(ns, "addr", "add", cidrAddr(ip, cidr), "dev", dev)
	if f == corev1.IPv6Protocol {
		argv = append(argv, "nodad")
	}
	return argv
}

func defaultRoute(ns string, f corev1.IPFamily, via string) []string {
	if f == corev1.IPv6Protocol {
		return ipn(ns, "-6", "route", "add", "default", "via", via)
	}
	return ipn(ns, "route", "add", "default", "via", via)
}

func cidrAddr(ip, cidr string) string {
	return fmt.Sprintf("%s/%d", ip, prefixLen(cidr))
}
