package nftables_test

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
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
	st := scaleState(10000, 10, 1)
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

// BenchmarkKernelFirstSync measures a first sync (in chunks) into an
// empty namespace at TestScale's sizes: services x endpoints x ports.
func BenchmarkKernelFirstSync(b *testing.B) {
	kerneltest.Require(b)
	_, node := flowtest.Fixture()
	for _, size := range [][3]int{{10000, 10, 1}, {5000, 50, 1}, {44000, 1, 2}} {
		b.Run(fmt.Sprintf("%dx%dx%d", size[0], size[1], size[2]), func(b *testing.B) {
			st := scaleState(size[0], size[1], size[2])
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				ns, be := kerneltest.NewNetns(b, "nftfirst"), kernelBackend(b, node)
				b.StartTimer()
				err := kerneltest.InNetns(ns, func() error {
					_, err := be.Sync(context.Background(), st, fullDiff())
					return err
				})
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// scaleState has n ClusterIP services of ports TCP ports each, eps ready
// endpoints per service.
func scaleState(n, eps, ports int) *proxier.State {
	st := emptyChurnState()
	for i := range n {
		var addrs []proxier.Endpoint
		for j := range eps {
			k := i*eps + j
			addrs = append(addrs, proxier.Endpoint{IP: netip.AddrFrom4([4]byte{10, 244, byte(k >> 8), byte(k)}), NodeName: "node-b", Ready: true, Serving: true})
		}
		for p := range ports {
			name := proxier.ServicePortName{NamespacedName: types.NamespacedName{Namespace: "bench", Name: fmt.Sprintf("svc-%05d", i)}, Port: fmt.Sprintf("p%d", p), Protocol: v1.ProtocolTCP}
			st.Services[name] = &proxier.ServicePort{Name: name, Protocol: v1.ProtocolTCP, Port: uint16(80 + p),
				ClusterIPs: []netip.Addr{netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)})}}
			eps := slices.Clone(addrs)
			for e := range eps {
				eps[e].Port = uint16(8080 + p)
			}
			st.Endpoints[name] = eps
		}
	}
	return st
}
