package iptables

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"runtime"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/internal/iptables/iptablestest"
	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
	"github.com/switchyard-proxy/switchyard/proxier"
)

// bigState builds n ClusterIP service ports with eps endpoints each (every
// tenth one a NodePort), shaped like the PERF-FACTS payloads.
func bigState(n, eps int) *proxier.State {
	st := stateOf([]string{"192.168.1.10"}, nil, nil)
	for i := 0; i < n; i++ {
		sp := svc("bench", fmt.Sprintf("svc-%d", i), "http", v1.ProtocolTCP, 80,
			netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)}).String())
		if i%10 == 0 {
			sp.NodePort = uint16(30000 + i%2768)
		}
		st.Services[sp.Name] = sp
		st.Endpoints[sp.Name] = benchEndpoints(i, eps, 0)
	}
	return st
}

// benchEndpoints gives service i its eps endpoints; gen shifts the
// addresses so a new generation replaces every endpoint.
func benchEndpoints(i, eps, gen int) []proxier.Endpoint {
	out := make([]proxier.Endpoint, 0, eps)
	for j := 0; j < eps; j++ {
		k := i*eps + j + gen
		out = append(out, proxier.Endpoint{IP: netip.AddrFrom4([4]byte{10, byte(64 + k>>16), byte(k >> 8), byte(k)}),
			Port: 8080, Ready: true, Serving: true, NodeName: "node-b"})
	}
	return out
}

// fullPayloadBytes renders state and returns the bytes of its full sync.
func fullPayloadBytes(tb testing.TB, fc *familyConfig, st *proxier.State) (int, int) {
	rs := render(fc, st)
	size, n := 0, 0
	for _, tx := range planTransactions(rs.chains(), nil, DefaultChunkRules) {
		size += len(mustPayload(tb, tx))
		n++
	}
	return size, n
}

func BenchmarkRender(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		st := bigState(n, 10)
		fc := testConfig().forFamily(v1.IPv4Protocol)
		b.Run(fmt.Sprintf("services=%d/endpoints=10", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				render(fc, st)
			}
			size, txs := fullPayloadBytes(b, fc, st)
			b.ReportMetric(float64(size), "payload-bytes")
			b.ReportMetric(float64(txs), "transactions")
		})
	}
}

func BenchmarkRenderPartialOneEndpoint(b *testing.B) {
	st := bigState(10000, 10)
	fc := testConfig().forFamily(v1.IPv4Protocol)
	prev := render(fc, st)
	name := spn("bench", "svc-5000", "http", v1.ProtocolTCP)
	diff := &proxier.Diff{Changed: map[proxier.ServicePortName]struct{}{name: {}}}
	b.ReportAllocs()
	gen := 0
	for b.Loop() {
		gen++
		st.Endpoints[name] = benchEndpoints(5000, 10, gen)
		renderPartial(fc, st, diff, prev)
	}
}

// payloadBytesSince sums the payload bytes of the restores since the n-th.
func payloadBytesSince(fake *iptablestest.Fake, n int) (bytes, calls int) {
	for _, c := range fake.Restores()[n:] {
		bytes += len(c.Data)
		calls++
	}
	return bytes, calls
}

// BenchmarkSyncFull is a first full sync of 10k services x 10 endpoints
// against the fake (which parses and validates every chunk).
func BenchmarkSyncFull(b *testing.B) {
	st := bigState(10000, 10)
	var bytes, calls int
	for b.Loop() {
		fake := iptablestest.NewFake()
		be := newTestBackend(b, fake, nil)
		mustSync(b, be, st, fullDiff())
		bytes, calls = payloadBytesSince(fake, 0)
	}
	b.ReportMetric(float64(bytes), "bytes/op")
	b.ReportMetric(float64(calls), "restores/op")
}

// BenchmarkSyncPartialOneEndpoint replaces one endpoint of one service
// out of 10k services x 10 endpoints.
func BenchmarkSyncPartialOneEndpoint(b *testing.B) {
	st := bigState(10000, 10)
	fake := iptablestest.NewFake()
	be := newTestBackend(b, fake, nil)
	mustSync(b, be, st, fullDiff())
	name := spn("bench", "svc-5000", "http", v1.ProtocolTCP)
	diff := &proxier.Diff{Changed: map[proxier.ServicePortName]struct{}{name: {}}}
	n := len(fake.Restores())
	gen := 0
	for b.Loop() {
		gen++
		st.Endpoints[name] = benchEndpoints(5000, 10, gen)
		if res := mustSync(b, be, st, diff); res.Full {
			b.Fatal("partial sync went full")
		}
	}
	bytes, calls := payloadBytesSince(fake, n)
	b.ReportMetric(float64(bytes)/float64(calls), "bytes/op")
}

// discardRunner is the fake for everything but Restore, which it only
// counts: it isolates the backend's own cost from the fake's parsing.
type discardRunner struct {
	*iptablestest.Fake
	bytes, calls int
}

func (d *discardRunner) Restore(_ context.Context, _ runner.Family, data []byte) error {
	d.bytes += len(data)
	d.calls++
	return nil
}

// BenchmarkSyncOwnCost measures the backend alone (render, diff, payload)
// at 10k services x 10 endpoints: a full sync and a one-endpoint partial
// sync, with a runner that discards the payloads.
func BenchmarkSyncOwnCost(b *testing.B) {
	st := bigState(10000, 10)
	b.Run("full", func(b *testing.B) {
		d := &discardRunner{Fake: iptablestest.NewFake()}
		be := newTestBackend(b, d.Fake, func(c *Config) { c.Runner = d })
		for b.Loop() {
			mustSync(b, be, st, fullDiff())
		}
		b.ReportMetric(float64(d.bytes)/float64(b.N), "bytes/op")
	})
	b.Run("partial-one-endpoint", func(b *testing.B) {
		d := &discardRunner{Fake: iptablestest.NewFake()}
		be := newTestBackend(b, d.Fake, func(c *Config) { c.Runner = d })
		mustSync(b, be, st, fullDiff())
		name := spn("bench", "svc-5000", "http", v1.ProtocolTCP)
		diff := &proxier.Diff{Changed: map[proxier.ServicePortName]struct{}{name: {}}}
		d.bytes, d.calls = 0, 0
		gen := 0
		for b.Loop() {
			gen++
			st.Endpoints[name] = benchEndpoints(5000, 10, gen)
			mustSync(b, be, st, diff)
		}
		b.ReportMetric(float64(d.bytes)/float64(b.N), "bytes/op")
	})
}

// ChainExists says yes: the discarded payloads did create the canaries.
func (d *discardRunner) ChainExists(runner.Family, string, string) (bool, error) { return true, nil }

// streamDiscard is the fake for everything but restores, whose payloads
// it takes as a streaming runner does and throws away: the backend's own
// cost on the streamed path. At the start of each restore and every
// peakEvery bytes of payload it collects garbage and notes the heap left,
// what the sync holds then: peakLive is the most it saw.
type streamDiscard struct {
	*iptablestest.Fake
	bytes, next int64
	peakLive    uint64
}

const peakEvery = 4 << 20

func (d *streamDiscard) RestoreFrom(_ context.Context, _ runner.Family, payload io.WriterTo) error {
	d.notePeak()
	n, err := payload.WriteTo(d)
	d.bytes += n
	return err
}

func (d *streamDiscard) Write(p []byte) (int, error) {
	d.wrote(len(p))
	return len(p), nil
}

// WriteString spares the string's copy, as the runner's bufio.Writer does.
func (d *streamDiscard) WriteString(s string) (int, error) {
	d.wrote(len(s))
	return len(s), nil
}

func (d *streamDiscard) wrote(n int) {
	d.next += int64(n)
	if d.next >= peakEvery {
		d.next = 0
		d.notePeak()
	}
}

func (d *streamDiscard) notePeak() {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	d.peakLive = max(d.peakLive, ms.HeapAlloc)
}

func (d *streamDiscard) Restore(_ context.Context, _ runner.Family, data []byte) error {
	d.bytes += int64(len(data))
	return nil
}

// ChainExists says yes: the discarded payloads did create the canaries.
func (d *streamDiscard) ChainExists(runner.Family, string, string) (bool, error) { return true, nil }

// BenchmarkSyncStreamedFull is a full sync of 10k services x 10 endpoints
// streamed into a runner that discards it: what the streamed path
// allocates, and the most it holds while it writes (the heap after a
// collection; the State is ~13 MB of it).
func BenchmarkSyncStreamedFull(b *testing.B) {
	st := bigState(10000, 10)
	d := &streamDiscard{Fake: iptablestest.NewFake()}
	be := newTestBackend(b, d.Fake, func(c *Config) { c.Runner = d })
	for b.Loop() {
		mustSync(b, be, st, fullDiff())
	}
	b.ReportMetric(float64(d.bytes)/float64(b.N), "bytes/op")
	b.ReportMetric(float64(d.peakLive)/(1<<20), "peak-live-MiB")
}
