package userspace

import (
	"bytes"
	"net/netip"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
	"github.com/switchyard-proxy/switchyard/proxier"
)

// TestSCTPServicePortsSkipped: SCTP service ports get no socket and no
// rule; each is logged once when first seen (not at every sync), again
// only after it went away and came back, and the gauge counts them.
func TestSCTPServicePortsSkipped(t *testing.T) {
	env := newTestEnv(t)
	sctpA, sctpB := spName("sig-a", v1.ProtocolSCTP), spName("sig-b", v1.ProtocolSCTP)
	web := spName("web", v1.ProtocolTCP)
	st := newState()
	addService(st, web, "10.96.0.10", 80, netip.MustParseAddrPort("10.244.1.10:8080"))
	addService(st, sctpA, "10.96.0.20", 9999, netip.MustParseAddrPort("10.244.1.20:9999")).NodePort = 30999
	addService(st, sctpB, "10.96.0.21", 9999)

	steps := []struct {
		name       string
		ports      []proxier.ServicePortName // SCTP ports in the state
		wantLogged []proxier.ServicePortName
	}{
		{"first sync logs each", []proxier.ServicePortName{sctpA, sctpB}, []proxier.ServicePortName{sctpA, sctpB}},
		{"unchanged: silent", []proxier.ServicePortName{sctpA, sctpB}, nil},
		{"one gone: silent", []proxier.ServicePortName{sctpA}, nil},
		{"back again: logged", []proxier.ServicePortName{sctpA, sctpB}, []proxier.ServicePortName{sctpB}},
	}
	for _, step := range steps {
		cur := cloneState(st)
		for _, n := range []proxier.ServicePortName{sctpA, sctpB} {
			if !slices.Contains(step.ports, n) {
				delete(cur.Services, n)
			}
		}
		env.b.mu.Lock()
		logged := env.b.skipped.note(cur, env.b.metrics.skipped)
		env.b.mu.Unlock()
		if !slices.Equal(logged, step.wantLogged) {
			t.Errorf("%s: logged %v, want %v", step.name, logged, step.wantLogged)
		}
		if v, ok := metricValue(t, env.reg, "switchyard_userspace_skipped_service_ports", "protocol", "SCTP"); !ok || v != float64(len(step.ports)) {
			t.Errorf("%s: skipped_service_ports{SCTP} = %v (%v), want %d", step.name, v, ok, len(step.ports))
		}
	}

	env.sync(t, st)
	for _, n := range []proxier.ServicePortName{sctpA, sctpB} {
		if _, ok := env.b.ProxyPort(n, v1.IPv4Protocol, false); ok {
			t.Errorf("%s has a proxy socket", n)
		}
	}
	if _, ok := env.b.ProxyPort(web, v1.IPv4Protocol, false); !ok {
		t.Errorf("the TCP service port next to them has no proxy socket")
	}
	payload := env.b.applied[runner.IPv4]
	for _, bad := range []string{"sctp", "sig-a", "30999"} {
		if bytes.Contains(payload, []byte(bad)) {
			t.Errorf("rules mention %q:\n%s", bad, payload)
		}
	}
	if !bytes.Contains(payload, []byte("ns/web:p")) {
		t.Errorf("rules lack the TCP service port:\n%s", payload)
	}
}

// TestSkippedGaugeZeroFromStart: the SCTP series exists at 0 before any
// sync, so alerts on it work on nodes that never had SCTP services.
func TestSkippedGaugeZeroFromStart(t *testing.T) {
	env := newTestEnv(t)
	if v, ok := metricValue(t, env.reg, "switchyard_userspace_skipped_service_ports", "protocol", "SCTP"); !ok || v != 0 {
		t.Errorf("skipped_service_ports{SCTP} = %v (%v), want 0, present", v, ok)
	}
}
