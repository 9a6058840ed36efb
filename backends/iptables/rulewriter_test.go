package iptables

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
)

func TestRuleWriterLines(t *testing.T) {
	var w ruleWriter
	if got := w.lines(); got != nil {
		t.Errorf("lines of nothing = %q, want nil", got)
	}
	w.rule("KUBE-SEP-X").host("-s", netip.MustParseAddr("fd00::1")).comment("ns/a:", "p").args("", "-j", chainMarkMasq)
	w.rule("KUBE-SEP-X", "-p", "tcp").dport("tcp", 80).addrPort(netip.MustParseAddrPort("10.0.0.1:8080"))
	want := []string{
		`-A KUBE-SEP-X -s fd00::1/128 -m comment --comment "ns/a:p" -j KUBE-MARK-MASQ`,
		`-A KUBE-SEP-X -p tcp -m tcp --dport 80 10.0.0.1:8080`,
	}
	if diff := cmp.Diff(want, w.lines()); diff != "" {
		t.Errorf("lines (-want +got):\n%s", diff)
	}
	// A flush starts afresh.
	w.rule("KUBE-EXT-X").prefix("! -s", netip.MustParsePrefix("10.244.0.0/16")).
		endpointComment("ns/a:p", netip.MustParseAddrPort("[fd00::1]:53"))
	got := w.appendLines([]string{"kept"})
	want = []string{"kept", `-A KUBE-EXT-X ! -s 10.244.0.0/16 -m comment --comment "ns/a:p -> [fd00::1]:53"`}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("appendLines (-want +got):\n%s", diff)
	}
}

// TestRenderAllocations guards the render's allocations per service port:
// its rules cost a few strings in all, not a few per endpoint (this port
// took 153 allocations before ruleWriter, 32 with it).
func TestRenderAllocations(t *testing.T) {
	st := bigState(1, 10)
	r := newServiceRenderer(testConfig().forFamily(v1.IPv4Protocol), st.Node)
	for _, sp := range st.Services {
		eps := st.Endpoints[sp.Name]
		if n := testing.AllocsPerRun(20, func() { r.render(sp, eps) }); n > 40 {
			t.Errorf("rendering a port with 10 endpoints made %v allocations, want at most 40", n)
		}
	}
}
