package nftables_test

import (
	"context"

	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/switchyard-proxy/switchyard/internal/kerneltest"
	"github.com/switchyard-proxy/switchyard/proxier"
	"github.com/switchyard-proxy/switchyard/proxier/flowtest"
)

// dualScaleState: n dual-stack Services as TestScale's dual run makes them:
// random cluster IPs of both families, eps local endpoints of each.
func dualScaleState(n, eps int, seed uint64) *proxier.State {
	st := emptyChurnState()
	r := rand.New(rand.NewPCG(seed, seed))
	taken := map[netip.Addr]bool{}
	pick := func(base netip.Addr, bits int) netip.Addr {
		for {
			b := base.As16()
			v := r.Uint32() & (1<<bits - 1)
			b[14], b[15] = byte(v>>8), byte(v)
			a := netip.AddrFrom16(b).Unmap()
			if !taken[a] {
				taken[a] = true
				return a
			}
		}
	}
	for i := range n {
		name := proxier.ServicePortName{NamespacedName: types.NamespacedName{Namespace: "sy1234", Name: fmt.Sprintf("bg-%05d", i)}, Port: "tcp", Protocol: v1.ProtocolTCP}
		st.Services[name] = &proxier.ServicePort{Name: name, Protocol: v1.ProtocolTCP, Port: 80,
			ClusterIPs: []netip.Addr{pick(netip.MustParseAddr("::ffff:10.96.0.0"), 16), netip.AddrFrom16([16]byte{0xfd, 0, 0, 0x10, 0, 0x96, 14: byte(i >> 8), 15: byte(i)})}}
		var list []proxier.Endpoint
		for j := range eps {
			k := i*eps + j
			for _, s := range []string{fmt.Sprintf("10.250.%d.%d", k/250%250, k%250+1), fmt.Sprintf("fd00:250::%x:%x", k/250%250+1000, k%250+1)} {
				list = append(list, proxier.Endpoint{IP: netip.MustParseAddr(s), Port: 8080, NodeName: "node-a", IsLocal: true, Ready: true, Serving: true})
			}
		}
		st.Endpoints[name] = list
	}
	return st
}

// TestKernelDualStackFirstSync: a first sync of 10k dual-stack Services,
// written in chunks, into an empty namespace. 512 service-ips elements of
// IPv6 services with these names once overflowed an element message's
// 16-bit list length, and the kernel refused the chunk (ENOENT).
func TestKernelDualStackFirstSync(t *testing.T) {
	kerneltest.Require(t)
	_, node := flowtest.Fixture()
	ns := kerneltest.NewNetns(t, "nftdual")
	err := kerneltest.InNetns(ns, func() error {
		_, err := kernelBackend(t, node).Sync(context.Background(), dualScaleState(10000, 10, 1), fullDiff())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
