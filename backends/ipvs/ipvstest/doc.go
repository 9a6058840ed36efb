// Package ipvstest has strict, stateful fakes of the IPVS backend's
// kernel interfaces and a packet-flow model over them.
//
//	k := ipvstest.NewKernel()            // fake IPVS, netlink, ipset, sysctl + iptables fake
//	b, _ := ipvs.New(ipvs.Config{Kernel: k.Kernel, ...})
//	b.Sync(ctx, state, diff)
//	k.IPVS.Dump()                         // ipvsadm-like listing
//	k.Netlink.Addresses("kube-ipvs0")
//	k.IPSet.Entries("KUBE-CLUSTER-IP")
//	k.IPVS.SetConnections("TCP/10.96.0.10:80", "10.244.1.2:8080", 1, 0)
//	flowtest.Run(t, k.FlowModel(nodeIPs))
//
// The fakes keep what the kernel would keep and reject what it would
// reject: a second service with the same address, port and protocol
// (EEXIST), a real server of a missing service (ESRCH), an unknown
// scheduler, an entry of the wrong form for its set, an entry added
// twice without -exist. FakeIPVS records every call that changes state
// (Ops) so tests can check that a sync changed only what it had to and
// never flushed.
//
// FlowModel answers the shared packet-flow table (proxier/flowtest): it
// traces the companion iptables rules with the iptables fake's tracer,
// after expanding each "-m set" match into plain matches over the fake
// sets' members, and looks the packet up in the fake IPVS table the way
// the kernel does (fwmark services first, then address, port and
// protocol).
package ipvstest
