//go:build e2e

package e2e

import (
	"net"
	"slices"
	"strings"
	"testing"

	"github.com/switchyard-proxy/switchyard/e2e/framework"
)

// The ipvs mode's operator view, checked where the iptables mode checks
// KUBE-SERVICES: `ipvsadm -Ln`, the kube-ipvs0 addresses and the ipsets.

// ipvsDummy is the interface the ipvs mode binds service addresses to.
const ipvsDummy = "kube-ipvs0"

// testIPVSListing: a service's cluster IP is a TCP and a UDP virtual server
// (scheduler rr, the default) with every pod as a masqueraded real server
// of weight 1, the address is bound to kube-ipvs0 and its ports are in the
// family's cluster-IP ipset; in each family.
func testIPVSListing(t *testing.T, m *modeEnv) {
	svc := m.EchoService(t, "ipvs-listing", m.Topo.Pods...)
	m.eachFamily(t, func(t *testing.T, f famView) {
		var want []framework.IPVSRealServer
		for _, p := range f.Topo.Pods {
			want = append(want, framework.IPVSRealServer{Addr: hostPort(p.IP, framework.EchoPort), Forward: "Masq", Weight: 1})
		}
		ip := f.clusterIP(t, svc)
		keys := []string{"TCP " + hostPort(ip, 80), "UDP " + hostPort(ip, 80)}
		var out string
		var found []framework.IPVSVirtualServer
		err := framework.WaitFor(converge, func() (bool, error) {
			out = nodeCommand(t, m, "ipvsadm", "-Ln")
			vss, err := framework.ParseIPVSList(out)
			if err != nil {
				return false, framework.Permanent(err)
			}
			found = found[:0]
			for _, k := range keys {
				v, ok := framework.FindIPVS(vss, k)
				if !ok || v.Scheduler != "rr" || !sameReals(v.Reals, want) {
					return false, nil
				}
				found = append(found, v)
			}
			return true, nil
		})
		if err != nil {
			t.Fatalf("ipvsadm -Ln never listed %v with real servers %v (scheduler rr): %v\n%s", keys, want, err, out)
		}
		for _, v := range found {
			t.Logf("ipvsadm -Ln: %s %s -> %v", v.Key, v.Scheduler, v.Reals)
		}
		bits := "/32 "
		if f.is6() {
			bits = "/128 "
		}
		if addrs := nodeCommand(t, m, "ip", "-o", "addr", "show", "dev", ipvsDummy); !strings.Contains(addrs, " "+ip+bits) {
			t.Errorf("%s does not carry the cluster IP %s:\n%s", ipvsDummy, ip, addrs)
		}
		checkClusterIPSet(t, f, ip)
	})
}

// checkClusterIPSet: the family's KUBE-CLUSTER-IP set (KUBE-6-CLUSTER-IP
// for IPv6, of family inet6), which the masquerade rules match, holds
// the service's cluster IP with each of its ports.
func checkClusterIPSet(t *testing.T, f famView, ip string) {
	t.Helper()
	set, family := "KUBE-CLUSTER-IP", "family inet "
	if f.is6() {
		set, family = "KUBE-6-CLUSTER-IP", "family inet6 "
	}
	out := nodeCommand(t, f.modeEnv, "ipset", "list", set)
	for _, want := range []string{family, "\n" + ip + ",tcp:80", "\n" + ip + ",udp:80"} {
		if !strings.Contains(out, want) {
			t.Errorf("ipset list %s has no %q:\n%s", set, strings.TrimSpace(want), out)
		}
	}
}

// sameReals compares real servers regardless of order.
func sameReals(got, want []framework.IPVSRealServer) bool {
	key := func(r framework.IPVSRealServer) string { return r.Addr }
	g, w := slices.Clone(got), slices.Clone(want)
	slices.SortFunc(g, func(a, b framework.IPVSRealServer) int { return strings.Compare(key(a), key(b)) })
	slices.SortFunc(w, func(a, b framework.IPVSRealServer) int { return strings.Compare(key(a), key(b)) })
	return slices.Equal(g, w)
}

// nodeIPVS lists the node namespace's virtual servers.
func nodeIPVS(t *testing.T, m *modeEnv) []framework.IPVSVirtualServer {
	t.Helper()
	out := nodeCommand(t, m, "ipvsadm", "-Ln")
	vss, err := framework.ParseIPVSList(out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return vss
}

// checkNoIPVSFor fails if any virtual server uses one of ips.
func checkNoIPVSFor(t *testing.T, m *modeEnv, ips ...string) {
	t.Helper()
	for _, v := range nodeIPVS(t, m) {
		_, addr, _ := strings.Cut(v.Key, " ")
		host, _, _ := net.SplitHostPort(addr) // "" for an FWM key
		for _, ip := range ips {
			if host == ip {
				t.Errorf("virtual server %s (%v) belongs to a service switchyard must ignore", v.Key, v.Reals)
			}
		}
	}
}

// checkIPVSCleanedUp: after --cleanup no virtual server, no KUBE- set and
// no kube-ipvs0 remain.
func checkIPVSCleanedUp(t *testing.T, m *modeEnv) {
	t.Helper()
	if vss := nodeIPVS(t, m); len(vss) != 0 {
		t.Errorf("virtual servers after --cleanup: %+v", vss)
	}
	if out := nodeCommand(t, m, "ipset", "list", "-n"); strings.Contains(out, "KUBE-") {
		t.Errorf("ipsets after --cleanup:\n%s", out)
	}
	if out, err := framework.RunIn(t.Context(), m.Topo.NodeNS, "ip", "link", "show", ipvsDummy); err == nil {
		t.Errorf("%s still exists after --cleanup:\n%s", ipvsDummy, out)
	}
}
