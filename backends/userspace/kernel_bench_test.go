package userspace

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"net/netip"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
	"github.com/switchyard-proxy/switchyard/internal/kerneltest"
)

// The kernel benchmarks compare, in one run and on the same veth
// topology, TCP from the client namespace to one pod through the
// userspace proxy (service 10.96.0.10) and through a plain iptables DNAT
// rule in the node namespace (10.96.0.99, the kernel baseline):
//
//	SWITCHYARD_KERNEL_TESTS=1 go test ./backends/userspace -run '^$' -bench Kernel
//
// Bulk reports MB/s of one long connection into a sink; Connect reports
// one short request/answer connection per op (connections/s = 1e9/ns/op).
// The proxy's sockets are opened inside the node namespace through
// NetnsSockets, which costs every proxied connection a namespace switch
// for its upstream dial that the daemon (running in its own namespace)
// does not pay.
const (
	sinkPort  = 9000
	benchPort = 80
	bulkPort  = 90
)

var (
	benchUserspaceIP = netip.MustParseAddr("10.96.0.10")
	benchDNATIP      = netip.MustParseAddr("10.96.0.99")
)

type benchTarget struct {
	name string
	ip   netip.Addr
}

func benchTargets() []benchTarget {
	return []benchTarget{{"userspace", benchUserspaceIP}, {"iptables-dnat", benchDNATIP}}
}

// newBenchTopology: one pod with a request/answer server (podPort) and a
// sink (sinkPort); the userspace service and the DNAT rules for both.
func newBenchTopology(b *testing.B) *topology {
	tp := newTopology(b, 1)
	ln, err := tp.podSockets[0].ListenTCP(netip.AddrPortFrom(netip.IPv4Unspecified(), podPort))
	if err != nil {
		b.Fatal(err)
	}
	serveTCP(b, "pod0", ln)
	sink, err := tp.podSockets[0].ListenTCP(netip.AddrPortFrom(netip.IPv4Unspecified(), sinkPort))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { sink.Close() })
	go serveSink(sink)

	be := tp.newKernelBackend(b, "")
	st := newState()
	addService(st, spName("rr", v1.ProtocolTCP), benchUserspaceIP.String(), benchPort, podAddr(0))
	addService(st, spName("bulk", v1.ProtocolTCP), benchUserspaceIP.String(), bulkPort, netip.AddrPortFrom(podIP(0), sinkPort))
	if _, err := be.Sync(context.Background(), st, nil); err != nil {
		b.Fatal(err)
	}
	r, err := runner.New(runner.Options{Netns: tp.node, WaitSeconds: kernelLockWait})
	if err != nil {
		b.Fatal(err)
	}
	dnat := "*nat\n:SY-BENCH-DNAT - [0:0]\n" +
		"-A SY-BENCH-DNAT -d 10.96.0.99/32 -p tcp -m tcp --dport 80 -j DNAT --to-destination " + podAddr(0).String() + "\n" +
		"-A SY-BENCH-DNAT -d 10.96.0.99/32 -p tcp -m tcp --dport 90 -j DNAT --to-destination " + netip.AddrPortFrom(podIP(0), sinkPort).String() + "\n" +
		"-A PREROUTING -j SY-BENCH-DNAT\nCOMMIT\n"
	if err := r.Restore(context.Background(), runner.IPv4, []byte(dnat)); err != nil {
		b.Fatal(err)
	}
	return tp
}

// serveSink reads each connection to its end and answers with the byte
// count (8 bytes, big endian).
func serveSink(ln *net.TCPListener) {
	for {
		c, err := ln.AcceptTCP()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			buf := make([]byte, 256<<10)
			var n uint64
			for {
				m, err := c.Read(buf)
				n += uint64(m)
				if err != nil {
					break
				}
			}
			binary.Write(c, binary.BigEndian, n)
		}()
	}
}

func BenchmarkKernelTCPBulk(b *testing.B) {
	kerneltest.Require(b)
	tp := newBenchTopology(b)
	for _, tc := range benchTargets() {
		b.Run(tc.name, func(b *testing.B) {
			benchBulk(b, tp.clientSocks, netip.AddrPortFrom(tc.ip, bulkPort))
		})
	}
}

func benchBulk(b *testing.B, s Sockets, addr netip.AddrPort) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := s.DialTCP(ctx, addr)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, 1<<20)
	b.SetBytes(int64(len(buf)))
	b.ResetTimer()
	for range b.N {
		if _, err := c.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
	c.CloseWrite()
	var got uint64
	if err := binary.Read(c, binary.BigEndian, &got); err != nil || got != uint64(b.N*len(buf)) {
		b.Fatalf("sink received %d bytes (%v), want %d", got, err, b.N*len(buf))
	}
	b.StopTimer()
}

func BenchmarkKernelTCPConnect(b *testing.B) {
	kerneltest.Require(b)
	tp := newBenchTopology(b)
	for _, tc := range benchTargets() {
		b.Run(tc.name, func(b *testing.B) {
			addr := netip.AddrPortFrom(tc.ip, benchPort)
			for range b.N {
				answer, err := nsRequest(tp.clientSocks, addr, "x")
				if err != nil || answer != "pod0:x" {
					b.Fatalf("request: %q, %v", answer, err)
				}
			}
		})
	}
}

// BenchmarkNetnsDial measures what NetnsSockets adds to a dial (the
// namespace switch), to read the Connect figures with: a dial to a
// loopback listener through NetnsSockets in a test namespace, and through
// HostSockets in the process's own namespace.
func BenchmarkNetnsDial(b *testing.B) {
	kerneltest.Require(b)
	tp := newTopology(b, 0)
	for _, tc := range []struct {
		name string
		s    Sockets
	}{{"netns", tp.nodeSockets}, {"host", HostSockets{}}} {
		b.Run(tc.name, func(b *testing.B) { benchDial(b, tc.s) })
	}
}

func benchDial(b *testing.B, s Sockets) {
	ln, err := s.ListenTCP(netip.MustParseAddrPort("127.0.0.1:0"))
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	addr := ln.Addr().(*net.TCPAddr).AddrPort()
	b.ResetTimer()
	for range b.N {
		c, err := s.DialTCP(context.Background(), addr)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, c)
		c.Close()
	}
}
