// Package flowtest is the shared, backend-independent packet-flow table:
// what Kubernetes (kube-proxy) does with the first packet of a connection,
// written by hand from the Service semantics, never computed by a backend
// or by proxier.SelectEndpoints.
//
// Every backend runs the same table against a model of what it programmed:
//
//	state, node := flowtest.Fixture()
//	// ... sync the backend (built from node.LocalDetector, node.NodeIPs,
//	// node.MasqueradeAll) with state against its fake kernel ...
//	flowtest.Run(t, model) // model.Flow(packet) answers from the fake
//
// RunDetectors runs the table once per local-traffic detector of
// kube-proxy's --detect-local-mode (Variants: ClusterCIDR, NodeCIDR,
// BridgeInterface, InterfaceNamePrefix, and none). Packets carry the
// interface they came in on (pods on this node: the bridge "cbr0", or a
// "cali..." veth in the InterfaceNamePrefix variant; the rest: "eth0";
// the node's own: none), and cases whose outcome depends on the detector
// say so per variant (Case.ByDetector).
//
// The iptables backend's model traces through iptablestest's fake (its
// packet tracer, flowModel in backends/iptables' tests); the IPVS and
// userspace backends write their own.
//
// A model that cannot tell whether a flow is masqueraded returns
// MasqChecked false and the masquerade column is then skipped.
package flowtest
