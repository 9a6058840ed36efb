package conntrack

import (
	"context"
	"net/netip"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/conntrack/conntracktest"
	"github.com/switchyard-proxy/switchyard/proxier"
)

type cleanupCase struct {
	name    string
	cfg     Config
	st      *proxier.State
	diff    *proxier.Diff
	keep    []conntracktest.Entry
	deleted []conntracktest.Entry
}

// TestReconcileDeletes checks, for each kind of change, exactly which
// entries one Reconcile deletes.
func TestReconcileDeletes(t *testing.T) {
	var cases []cleanupCase
	cases = append(cases, endpointCases()...)
	cases = append(cases, serviceCases()...)
	cases = append(cases, addressCases()...)
	cases = append(cases, familyCases()...)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tb := conntracktest.NewTable()
			if err := tb.Add(append(slices.Clone(tc.keep), tc.deleted...)...); err != nil {
				t.Fatal(err)
			}
			n, err := New(tb, tc.cfg, nil).Reconcile(context.Background(), tc.st, tc.diff)
			if err != nil {
				t.Fatalf("Reconcile: %v", err)
			}
			if n != len(tc.deleted) {
				t.Errorf("Reconcile deleted %d entries, want %d", n, len(tc.deleted))
			}
			checkRemaining(t, tb, tc.keep)
		})
	}
}

func endpointCases() []cleanupCase {
	return []cleanupCase{{
		name:    "endpoint removed",
		st:      state(dnsService(), eps(ready(epB))),
		diff:    staleDiff(dnsName, epA),
		keep:    []conntracktest.Entry{udpVia(c(1), clusterIP, 53, epB)},
		deleted: []conntracktest.Entry{udpVia(c(2), clusterIP, 53, epA)},
	}, {
		name:    "endpoint no longer serving",
		st:      state(dnsService(), eps(notServing(epA), ready(epB))),
		diff:    staleDiff(dnsName, epA),
		keep:    []conntracktest.Entry{udpVia(c(3), clusterIP, 53, epB)},
		deleted: []conntracktest.Entry{udpVia(c(4), clusterIP, 53, epA)},
	}, {
		name:    "terminating endpoint while another is ready",
		st:      state(dnsService(), eps(terminating(epA), ready(epB))),
		diff:    staleDiff(dnsName, epA),
		keep:    []conntracktest.Entry{udpVia(c(5), clusterIP, 53, epB)},
		deleted: []conntracktest.Entry{udpVia(c(6), clusterIP, 53, epA)},
	}, {
		name:    "serving-terminating endpoint is reachable when none is ready",
		st:      state(dnsService(), eps(terminating(epA))),
		diff:    staleDiff(dnsName, epB),
		keep:    []conntracktest.Entry{udpVia(c(7), clusterIP, 53, epA)},
		deleted: []conntracktest.Entry{udpVia(c(8), clusterIP, 53, epB)},
	}, {
		name: "last endpoint removed: never-NATed entry kept, NATed one deleted",
		st:   state(dnsService(), eps()),
		diff: staleDiff(dnsName, epA),
		keep: []conntracktest.Entry{conntracktest.Plain(conntracktest.UDP, c(9), netip.AddrPortFrom(clusterIP, 53))},
		deleted: []conntracktest.Entry{
			udpVia(c(10), clusterIP, 53, epA),
			udpVia(c(11), nodeIP, 30053, epA),
		},
	}, {
		name: "endpoint target port changed",
		st:   state(dnsService(), eps(ready(addrPort("10.244.1.10:5353")))),
		diff: staleDiff(dnsName, epA),
		keep: []conntracktest.Entry{udpVia(c(12), clusterIP, 53, addrPort("10.244.1.10:5353"))},
		deleted: []conntracktest.Entry{
			udpVia(c(13), clusterIP, 53, epA),
		},
	}, {
		name: "internal traffic policy Local: remote endpoint not reachable",
		st: state(func() *proxier.ServicePort {
			sp := dnsService()
			sp.InternalPolicyLocal, sp.ExternalIPs, sp.LoadBalancerIPs, sp.NodePort = true, nil, nil, 0
			return sp
		}(), eps(local(epA), ready(epB))),
		diff:    fullDiff(),
		keep:    []conntracktest.Entry{udpVia(c(14), clusterIP, 53, epA)},
		deleted: []conntracktest.Entry{udpVia(c(15), clusterIP, 53, epB)},
	}}
}

func local(ap netip.AddrPort) proxier.Endpoint {
	e := ready(ap)
	e.IsLocal = true
	return e
}

func serviceCases() []cleanupCase {
	tcp := &proxier.ServicePort{Name: portName("dns", "dns-tcp", v1.ProtocolTCP), Protocol: v1.ProtocolTCP,
		Port: 53, ClusterIPs: []netip.Addr{clusterIP}}
	deleted := emptyDiff()
	deleted.Changed[dnsName] = struct{}{}
	deleted.Deleted[dnsName] = dnsService()
	newlyServing := emptyDiff()
	newlyServing.Changed[dnsName] = struct{}{}
	newlyServing.NewlyServing[dnsName] = struct{}{}
	renamed := dnsService()
	renamed.Name = portName("dns", "dns-renamed", v1.ProtocolUDP)
	return []cleanupCase{{
		name: "service deleted: all its entries go, others stay",
		st:   state(),
		diff: deleted,
		keep: []conntracktest.Entry{conntracktest.Plain(conntracktest.UDP, c(16), epA)},
		deleted: []conntracktest.Entry{
			udpVia(c(17), clusterIP, 53, epA),
			conntracktest.Plain(conntracktest.UDP, c(18), netip.AddrPortFrom(clusterIP, 53)),
			udpVia(c(19), nodeIP, 30053, epB),
			udpVia(c(20), externalIP, 53, epB),
			udpVia(c(21), lbIP, 53, epB),
		},
	}, {
		name: "port renamed: the deleted name's address is still served",
		st:   state(renamed, eps(ready(epB))),
		diff: func() *proxier.Diff {
			d := emptyDiff()
			d.Changed[dnsName], d.Changed[renamed.Name] = struct{}{}, struct{}{}
			d.Deleted[dnsName] = dnsService()
			return d
		}(),
		keep: []conntracktest.Entry{udpVia(c(22), clusterIP, 53, epB)},
		deleted: []conntracktest.Entry{
			udpVia(c(23), clusterIP, 53, epA),
		},
	}, {
		name: "zero to N endpoints: never-NATed entries deleted",
		st:   state(dnsService(), eps(ready(epA))),
		diff: newlyServing,
		deleted: []conntracktest.Entry{
			conntracktest.Plain(conntracktest.UDP, c(24), netip.AddrPortFrom(clusterIP, 53)),
			conntracktest.Plain(conntracktest.UDP, c(25), netip.AddrPortFrom(nodeIP, 30053)),
			conntracktest.Plain(conntracktest.UDP, c(26), netip.AddrPortFrom(externalIP, 53)),
			conntracktest.Plain(conntracktest.UDP, c(27), netip.AddrPortFrom(lbIP, 53)),
		},
	}, {
		name: "TCP untouched",
		st:   state(dnsService(), eps(ready(epB)), tcp, eps(ready(epB))),
		diff: func() *proxier.Diff {
			d := staleDiff(dnsName, epA)
			d.StaleEndpoints = append(d.StaleEndpoints, staleDiff(tcp.Name, epA).StaleEndpoints...)
			return d
		}(),
		keep: []conntracktest.Entry{
			conntracktest.NATed(conntracktest.TCP, c(28), netip.AddrPortFrom(clusterIP, 53), epA),
			conntracktest.NATed(conntracktest.TCP, c(29), netip.AddrPortFrom(nodeIP, 30053), epA),
		},
		deleted: []conntracktest.Entry{udpVia(c(30), clusterIP, 53, epA)},
	}}
}
