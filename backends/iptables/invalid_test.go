package iptables

import (
	"bytes"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/switchyard-proxy/switchyard/internal/iptables/iptablestest"
	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
	"github.com/switchyard-proxy/switchyard/proxier"
	"github.com/switchyard-proxy/switchyard/proxier/metrics"
)

// lockedBuffer is a klog sink for one test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// distinctLines returns the distinct log lines containing s (klog writes
// an error line to every lower severity's output as well).
func (l *lockedBuffer) distinctLines(s string) []string {
	klog.Flush()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range strings.Split(l.b.String(), "\n") {
		if strings.Contains(line, s) && !slices.Contains(out, line) {
			out = append(out, line)
		}
	}
	return out
}

func captureLogs(t *testing.T) *lockedBuffer {
	t.Helper()
	buf := &lockedBuffer{}
	klog.LogToStderr(false)
	klog.SetOutput(buf)
	t.Cleanup(func() { klog.Flush(); klog.SetOutput(os.Stderr); klog.LogToStderr(true) })
	return buf
}

func badService() *v1.Service {
	return &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "bad"},
		Spec: v1.ServiceSpec{
			Type: v1.ServiceTypeNodePort, ClusterIP: "10.96.7.7", ClusterIPs: []string{"10.96.7.7"},
			Ports: []v1.ServicePort{
				{Name: "zero", Protocol: v1.ProtocolTCP, Port: 0},
				{Name: "http", Protocol: v1.ProtocolTCP, Port: 80, NodePort: 30080},
				{Name: "big", Protocol: v1.ProtocolTCP, Port: 70000},
				{Name: "bignp", Protocol: v1.ProtocolTCP, Port: 81, NodePort: 99999},
				{Name: "icmp", Protocol: "ICMP", Port: 82},
			},
		},
	}
}

// badSlice holds one good endpoint among bad ones: an IPv6 address in an
// IPv4 slice, an empty address, no address at all, 1,000 garbage
// addresses; and bad ports around the good one.
func badSlice() *discovery.EndpointSlice {
	s := &discovery.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "ns", Name: "bad-1", Labels: map[string]string{discovery.LabelServiceName: "bad"}},
		AddressType: discovery.AddressTypeIPv4,
		Ports: []discovery.EndpointPort{
			{Name: ptr.To("http"), Protocol: ptr.To(v1.ProtocolTCP)}, // no port
			{Name: ptr.To("http"), Protocol: ptr.To(v1.ProtocolTCP), Port: ptr.To[int32](0)},
			{Name: ptr.To("http"), Protocol: ptr.To(v1.ProtocolTCP), Port: ptr.To[int32](70000)},
			{Name: ptr.To("http"), Protocol: ptr.To(v1.ProtocolTCP), Port: ptr.To[int32](8080)},
		},
		Endpoints: []discovery.Endpoint{
			{Addresses: []string{"10.244.0.5"}},
			{Addresses: []string{"fd00::5"}},
			{Addresses: []string{""}},
			{Addresses: nil},
		},
	}
	for i := range 1000 {
		s.Endpoints = append(s.Endpoints, discovery.Endpoint{Addresses: []string{fmt.Sprintf("not-an-ip-%d", i)}})
	}
	return s
}

// TestInvalidObjectsSkipped: what the API would reject but a buggy
// controller may serve is skipped field by field, counted in
// switchyard_invalid_objects_total, logged once per object, and the rest
// of the object is programmed in one accepted sync.
func TestInvalidObjectsSkipped(t *testing.T) {
	logs := captureLogs(t)
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	fake := iptablestest.NewFake()
	b := newTestBackend(t, fake, nil)
	p := proxier.New(nil, b, proxier.Config{NodeName: testNode}, m, nil, nil)
	p.OnServiceUpdate(nil, badService())
	p.OnEndpointSliceUpdate(badSlice(), false)
	st, diff := p.Snapshotter().Snapshot()
	mustSync(t, b, st, diff)

	http := spn("ns", "bad", "http", v1.ProtocolTCP)
	if got := slices.Collect(maps.Keys(st.Services)); !cmp.Equal(got, []proxier.ServicePortName{http}) {
		t.Errorf("programmed service ports %v, want only %v", got, http)
	}
	res, err := fake.Trace(runner.IPv4, iptablestest.Packet{SrcIP: netip.MustParseAddr("10.244.9.9"),
		DstIP: netip.MustParseAddr("10.96.7.7"), DstPort: 80})
	if err != nil || !cmp.Equal(res.Endpoints, []string{"10.244.0.5:8080"}) {
		t.Errorf("cluster IP reaches %v (err %v), want only the one valid endpoint", res.Endpoints, err)
	}
	want := map[string]float64{
		"Service/port": 4, "EndpointSlice/port": 3, "Endpoint/address": 1003,
	}
	for k, v := range want {
		kind, reason, _ := strings.Cut(k, "/")
		if got := metricValue(m.InvalidObjectsTotal.WithLabelValues(kind, reason)); got != v {
			t.Errorf("switchyard_invalid_objects_total{kind=%q,reason=%q} = %v, want %v", kind, reason, got, v)
		}
	}
	for _, what := range []string{"invalid parts of a Service", "invalid parts of an EndpointSlice"} {
		if lines := logs.distinctLines(what); len(lines) != 1 {
			t.Errorf("%d log lines about %q, want 1:\n%s", len(lines), what, strings.Join(lines, "\n"))
		}
	}
}

// TestThousandEndpointsInOneSlice: a slice at the API's limit is valid and
// programmed whole; nothing is clamped.
func TestThousandEndpointsInOneSlice(t *testing.T) {
	fake := iptablestest.NewFake()
	b := newTestBackend(t, fake, nil)
	p := proxier.New(nil, b, proxier.Config{NodeName: testNode}, nil, nil, nil)
	svc := badService()
	svc.Spec.Ports = svc.Spec.Ports[1:2]
	p.OnServiceUpdate(nil, svc)
	s := badSlice()
	s.Ports = s.Ports[3:]
	s.Endpoints = nil
	for i := range 1000 {
		s.Endpoints = append(s.Endpoints, discovery.Endpoint{Addresses: []string{fmt.Sprintf("10.245.%d.%d", i/250, i%250+1)}})
	}
	p.OnEndpointSliceUpdate(s, false)
	st, diff := p.Snapshotter().Snapshot()
	mustSync(t, b, st, diff)
	res, err := fake.Trace(runner.IPv4, iptablestest.Packet{SrcIP: netip.MustParseAddr("10.244.9.9"),
		DstIP: netip.MustParseAddr("10.96.7.7"), DstPort: 80})
	if err != nil || len(res.Endpoints) != 1000 {
		t.Errorf("cluster IP reaches %d endpoints (err %v), want 1000", len(res.Endpoints), err)
	}
}
