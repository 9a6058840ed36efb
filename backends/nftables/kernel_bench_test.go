package nftables_test

import (
	"context"
	"fmt"
	"net/netip"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/switchyard-proxy/switchyard/backends/nftables"
	"github.com/switchyard-proxy/switchyard/internal/kerneltest"
	"github.com/switchyard-proxy/switchyard/proxier"
	"github.com/switchyard-proxy/switchyard/proxier/flowtest"
)

// BenchmarkKernelRestart measures a restart's full sync at 10k services x
// 10 endpoints: a new backend over the table its predecessor wrote, one
// transaction. B/op is what the sync allocates, the netlink batch
// included. Run with SWITCHYARD_KERNEL_TESTS=1 -bench KernelRestart.
func BenchmarkKernelRestart(b *testing.B) {
	kerneltest.Require(b)
	ns := kerneltest.NewNetns(b, "nftbench")
	_, node := flowtest.Fixture()
	st := scaleState(10000, 10)
	sync := func(be *nftables.Backend) {
		err := kerneltest.InNetns(ns, func() error {
			_, err := be.Sync(context.Background(), st, fullDiff())
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	sync(kernelBackend(b, node))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		be := kernelBackend(b, node)
		b.StartTimer()
		sync(be)
	}
}

// scaleState has n ClusterIP services of one TCP port, eps ready
// endpoints each.
func scaleState(n, eps int) *proxier.State {
	st := emptyChurnState()
	for i := range n {
		name := proxier.ServicePortName{NamespacedName: types.NamespacedName{Namespace: "bench", Name: fmt.Sprintf("svc-%05d", i)}, Port: "http", Protocol: v1.ProtocolTCP}
		st.Services[name] = &proxier.ServicePort{Name: name, Protocol: v1.ProtocolTCP, Port: 80,
			ClusterIPs: []netip.Addr{netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)})}}
		for j := range eps {
			k := i*eps + j
			st.Endpoints[name] = append(st.Endpoints[name], proxier.Endpoint{
				IP: netip.AddrFrom4([4]byte{10, 244, byte(k >> 8), byte(k)}), Port: 8080, NodeName: "node-b", Ready: true, Serving: true})
		}
	}
	return st
}
