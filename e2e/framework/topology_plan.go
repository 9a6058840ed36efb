package framework

import "fmt"

// nodeSysctls are set inside the node namespace: it routes between the client
// network and the pod bridge, and bridged pod-to-pod replies must pass
// iptables so conntrack can undo a Service DNAT (what br_netfilter does for
// kube-proxy on a real node). route_localnet is left to the daemon, which
// owns that decision as kube-proxy does.
func nodeSysctls() []string {
	return []string{
		"net.ipv4.ip_forward=1",
		"net.bridge.bridge-nf-call-iptables=1",
	}
}

// SetupCommands returns, in order, the argv of every command that builds the
// topology. Every command acts inside one of the topology's namespaces (`ip
// -n`, `ip netns exec`) except the `ip netns add` calls that create them.
func (t *Topology) SetupCommands() [][]string {
	var cmds [][]string
	for _, ns := range t.Namespaces() {
		cmds = append(cmds, []string{"ip", "netns", "add", ns}, ipn(ns, "link", "set", "lo", "up"))
	}
	for _, s := range nodeSysctls() {
		cmds = append(cmds, []string{"ip", "netns", "exec", t.NodeNS, "sysctl", "-q", "-w", s})
	}
	cmds = append(cmds, t.bridgeCommands()...)
	for i, p := range t.Pods {
		cmds = append(cmds, t.podCommands(i, p)...)
	}
	return append(cmds, t.clientCommands()...)
}

func (t *Topology) bridgeCommands() [][]string {
	return [][]string{
		ipn(t.NodeNS, "link", "add", bridgeName, "type", "bridge"),
		ipn(t.NodeNS, "addr", "add", cidrAddr(t.BridgeIP, t.PodCIDR), "dev", bridgeName),
		ipn(t.NodeNS, "link", "set", bridgeName, "up"),
	}
}

// podCommands creates the pod's veth in the node namespace with its peer
// moved straight into the pod namespace, so nothing is ever created in the
// host namespace. Hairpin mode lets a pod reach itself through a Service.
func (t *Topology) podCommands(i int, p Pod) [][]string {
	nodeEnd := fmt.Sprintf("veth-pod%d", i)
	return [][]string{
		ipn(t.NodeNS, "link", "add", nodeEnd, "type", "veth", "peer", "name", podIfName, "netns", p.NS),
		ipn(t.NodeNS, "link", "set", nodeEnd, "master", bridgeName),
		ipn(t.NodeNS, "link", "set", nodeEnd, "type", "bridge_slave", "hairpin", "on"),
		ipn(t.NodeNS, "link", "set", nodeEnd, "up"),
		ipn(p.NS, "addr", "add", cidrAddr(p.IP, t.PodCIDR), "dev", podIfName),
		ipn(p.NS, "link", "set", podIfName, "up"),
		ipn(p.NS, "route", "add", "default", "via", t.BridgeIP),
	}
}

// clientCommands connects the client namespace to the node on the external
// network; its default route is the node, so Service, pod, NodePort and
// external IPs are all reached through the node's rules.
func (t *Topology) clientCommands() [][]string {
	return [][]string{
		ipn(t.NodeNS, "link", "add", nodeClientVeth, "type", "veth", "peer", "name", podIfName, "netns", t.ClientNS),
		ipn(t.NodeNS, "addr", "add", cidrAddr(t.NodeIP, t.ExtCIDR), "dev", nodeClientVeth),
		ipn(t.NodeNS, "link", "set", nodeClientVeth, "up"),
		ipn(t.ClientNS, "addr", "add", cidrAddr(t.ClientIP, t.ExtCIDR), "dev", podIfName),
		ipn(t.ClientNS, "link", "set", podIfName, "up"),
		ipn(t.ClientNS, "route", "add", "default", "via", t.NodeIP),
		// Like a real node, the node has a default gateway (here the
		// client): traffic to a service IP without rules is forwarded,
		// not dropped for lack of a route, so it passes the FORWARD chain.
		ipn(t.NodeNS, "route", "add", "default", "via", t.ClientIP),
	}
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

func cidrAddr(ip, cidr string) string {
	return fmt.Sprintf("%s/%d", ip, prefixLen(cidr))
}
