package nftables_test

import (
	"context"
	"fmt"
	"net/netip"
	"runtime"
	"runtime/debug"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/switchyard-proxy/switchyard/backends/nftables"
	"github.com/switchyard-proxy/switchyard/internal/kerneltest"
	"github.com/switchyard-proxy/switchyard/internal/procstatus"
	"github.com/switchyard-proxy/switchyard/proxier"
	"github.com/switchyard-proxy/switchyard/proxier/flowtest"
)

// BenchmarkKernelRestart measures a restart's full sync at TestScale's
// sizes: a new backend over the table its predecessor wrote, one
// transaction. B/op is what the sync allocates, the netlink batch
// included; peak-MB is the process's VmHWM during the sync (reset
// before it). Run with SWITCHYARD_KERNEL_TESTS=1 -bench KernelRestart.
func BenchmarkKernelRestart(b *testing.B) {
	kerneltest.Require(b)
	_, node := flowtest.Fixture()
	for _, size := range benchSizes {
		b.Run(size.String(), func(b *testing.B) {
			ns, st := kerneltest.NewNetns(b, "nftbench"), size.state()
			benchSync(b, ns, kernelBackend(b, node), st)
			b.ReportAllocs()
			b.ResetTimer()
			var peak float64
			for range b.N {
				b.StopTimer()
				be := kernelBackend(b, node)
				resetPeak(b)
				b.StartTimer()
				benchSync(b, ns, be, st)
				peak = max(peak, peakMB(b))
			}
			b.ReportMetric(peak, "peak-MB")
		})
	}
}

// BenchmarkKernelFirstSync measures a first sync (in chunks) into an
// empty namespace at TestScale's sizes, peak-MB as above.
func BenchmarkKernelFirstSync(b *testing.B) {
	kerneltest.Require(b)
	_, node := flowtest.Fixture()
	for _, size := range benchSizes {
		b.Run(size.String(), func(b *testing.B) {
			st := size.state()
			b.ReportAllocs()
			b.ResetTimer()
			var peak float64
			for range b.N {
				b.StopTimer()
				ns, be := kerneltest.NewNetns(b, "nftfirst"), kernelBackend(b, node)
				resetPeak(b)
				b.StartTimer()
				benchSync(b, ns, be, st)
				peak = max(peak, peakMB(b))
			}
			b.ReportMetric(peak, "peak-MB")
		})
	}
}

// benchSize is services x endpoints x ports.
type benchSize [3]int

var benchSizes = []benchSize{{10000, 10, 1}, {5000, 50, 1}, {44000, 1, 2}}

func (s benchSize) String() string        { return fmt.Sprintf("%dx%dx%d", s[0], s[1], s[2]) }
func (s benchSize) state() *proxier.State { return scaleState(s[0], s[1], s[2]) }

func benchSync(b *testing.B, ns string, be *nftables.Backend, st *proxier.State) {
	err := kerneltest.InNetns(ns, func() error {
		_, err := be.Sync(context.Background(), st, fullDiff())
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
}

// resetPeak sets VmHWM back to the current RSS, after a collection so
// that the garbage of earlier work is not counted.
func resetPeak(b *testing.B) {
	runtime.GC()
	debug.FreeOSMemory()
	if err := procstatus.ResetPeak(); err != nil {
		b.Fatal(err)
	}
}

func peakMB(b *testing.B) float64 {
	peak, err := procstatus.Bytes("VmHWM:")
	if err != nil {
		b.Fatal(err)
	}
	return float64(peak) / 1e6
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
