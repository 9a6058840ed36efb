package healthcheck

import (
	"errors"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

var (
	svcA = types.NamespacedName{Namespace: "ns", Name: "a"}
	svcB = types.NamespacedName{Namespace: "ns", Name: "b"}
)

// probeService GETs the health check the fake listener serves for the
// requested address.
func probeService(t *testing.T, fake *LoopbackListener, requested string) probe {
	t.Helper()
	addr, ok := fake.Addr(requested)
	if !ok {
		t.Fatalf("no listener open for %s", requested)
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	return get(t, client, "http://"+addr+"/")
}

func serviceBody(name types.NamespacedName, n int, healthy bool) map[string]any {
	return map[string]any{
		"service":             map[string]any{"namespace": name.Namespace, "name": name.Name},
		"localEndpoints":      float64(n),
		"serviceProxyHealthy": healthy,
	}
}

func checkService(t *testing.T, what string, p probe, code int, body map[string]any) {
	t.Helper()
	if p.code != code {
		t.Errorf("%s: status %d, want %d", what, p.code, code)
	}
	if diff := cmp.Diff(body, p.body); diff != "" {
		t.Errorf("%s: body (-want +got):\n%s", what, diff)
	}
	if ct, ns := p.hdr.Get("Content-Type"), p.hdr.Get("X-Content-Type-Options"); ct != "application/json" || ns != "nosniff" {
		t.Errorf("%s: headers Content-Type %q, X-Content-Type-Options %q", what, ct, ns)
	}
}

func TestServiceHealthAnswersByLocalEndpoints(t *testing.T) {
	fake := NewLoopbackListener()
	clk := clocktesting.NewFakeClock(t0)
	proxier := NewProxierHealthServer(ProxierHealthConfig{HealthTimeout: timeout, Clock: clk})
	s := NewServiceHealthServer(ServiceHealthConfig{Listener: fake, Proxier: proxier})
	defer s.Close()

	if err := s.SyncServices(map[types.NamespacedName]uint16{svcA: 30001, svcB: 30002}); err != nil {
		t.Fatal(err)
	}
	checkService(t, "a before endpoints", probeService(t, fake, ":30001"), unavailable, serviceBody(svcA, 0, true))

	s.SyncEndpoints(map[types.NamespacedName]int{svcA: 2})
	p := probeService(t, fake, ":30001")
	checkService(t, "a with 2 local endpoints", p, ok, serviceBody(svcA, 2, true))
	if w := p.hdr.Get("X-Load-Balancing-Endpoint-Weight"); w != "2" {
		t.Errorf("X-Load-Balancing-Endpoint-Weight = %q, want 2", w)
	}
	checkService(t, "b without endpoints", probeService(t, fake, ":30002"), unavailable, serviceBody(svcB, 0, true))

	proxier.QueuedUpdate()
	clk.Step(timeout)
	checkService(t, "a while proxier stale", probeService(t, fake, ":30001"), unavailable, serviceBody(svcA, 2, false))
	proxier.Updated()
	checkService(t, "a after proxier synced", probeService(t, fake, ":30001"), ok, serviceBody(svcA, 2, true))

	s.SyncEndpoints(map[types.NamespacedName]int{svcB: 1})
	checkService(t, "a dropped from endpoints", probeService(t, fake, ":30001"), unavailable, serviceBody(svcA, 0, true))
	checkService(t, "b with 1", probeService(t, fake, ":30002"), ok, serviceBody(svcB, 1, true))
}

func TestServiceHealthListenersFollowSyncServices(t *testing.T) {
	addrs := []netip.Addr{netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("fd00::1")}
	steps := []struct {
		name  string
		addrs []netip.Addr
		want  map[types.NamespacedName]uint16
		open  []string
	}{
		{"all addresses: two services", nil, map[types.NamespacedName]uint16{svcA: 30001, svcB: 30002}, []string{":30001", ":30002"}},
		{"all addresses: b removed", nil, map[types.NamespacedName]uint16{svcA: 30001}, []string{":30001"}},
		{"all addresses: port changed", nil, map[types.NamespacedName]uint16{svcA: 30003}, []string{":30003"}},
		{"all addresses: port 0 ignored", nil, map[types.NamespacedName]uint16{svcA: 30003, svcB: 0}, []string{":30003"}},
		{"all addresses: none", nil, nil, []string{}},
		{"node addresses", addrs, map[types.NamespacedName]uint16{svcA: 30001}, []string{"10.0.0.1:30001", "[fd00::1]:30001"}},
	}
	var (
		fake = NewLoopbackListener()
		s    *ServiceHealthServer
		cur  []netip.Addr
	)
	for _, st := range steps {
		if s == nil || !cmp.Equal(st.addrs, cur, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })) {
			if s != nil {
				s.Close()
			}
			fake = NewLoopbackListener()
			s = NewServiceHealthServer(ServiceHealthConfig{Listener: fake, NodeAddresses: st.addrs})
			cur = st.addrs
		}
		if err := s.SyncServices(st.want); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if diff := cmp.Diff(st.open, fake.Open()); diff != "" {
			t.Errorf("%s: open listeners (-want +got):\n%s", st.name, diff)
		}
		for _, a := range st.open {
			if p := probeService(t, fake, a); p.code != unavailable {
				t.Errorf("%s: %s answered %d with no endpoints, want 503", st.name, a, p.code)
			}
		}
	}
	s.Close()
	if got := fake.Open(); len(got) != 0 {
		t.Errorf("after Close: still open %v", got)
	}
}

func TestServiceHealthClosedServerStopsAnswering(t *testing.T) {
	fake := NewLoopbackListener()
	s := NewServiceHealthServer(ServiceHealthConfig{Listener: fake})
	defer s.Close()
	if err := s.SyncServices(map[types.NamespacedName]uint16{svcA: 30001}); err != nil {
		t.Fatal(err)
	}
	addr, _ := fake.Addr(":30001")
	if err := s.SyncServices(nil); err != nil {
		t.Fatal(err)
	}
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err == nil {
		conn.Close()
		t.Fatalf("dial %s after the service was removed: connected, want refused", addr)
	}
}

func TestServiceHealthListenFailureIsRetried(t *testing.T) {
	fake := NewLoopbackListener()
	addrs := []netip.Addr{netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")}
	s := NewServiceHealthServer(ServiceHealthConfig{Listener: fake, NodeAddresses: addrs})
	defer s.Close()
	want := map[types.NamespacedName]uint16{svcA: 30001, svcB: 30002}

	fake.SetFailure("10.0.0.2:30001", ErrAddressInUse)
	err := s.SyncServices(want)
	if !errors.Is(err, ErrAddressInUse) || !strings.Contains(err.Error(), "ns/a") {
		t.Errorf("SyncServices = %v, want an ErrAddressInUse error naming ns/a", err)
	}
	// a's first address was opened and must be closed again; b is fine.
	if diff := cmp.Diff([]string{"10.0.0.1:30002", "10.0.0.2:30002"}, fake.Open()); diff != "" {
		t.Errorf("open after failure (-want +got):\n%s", diff)
	}

	fake.SetFailure("10.0.0.2:30001", nil)
	if err := s.SyncServices(want); err != nil {
		t.Fatalf("retry: %v", err)
	}
	wantOpen := []string{"10.0.0.1:30001", "10.0.0.1:30002", "10.0.0.2:30001", "10.0.0.2:30002"}
	if diff := cmp.Diff(wantOpen, fake.Open()); diff != "" {
		t.Errorf("open after retry (-want +got):\n%s", diff)
	}
}
