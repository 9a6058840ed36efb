package nfacct

import (
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestCollector(t *testing.T) {
	f := NewFake()
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollector(f))
	// Nothing created yet: no series, no error.
	if n, err := testutil.GatherAndCount(reg); err != nil || n != 0 {
		t.Fatalf("before Ensure: %d series, %v", n, err)
	}
	if err := f.Ensure(LocalhostNodePortsAccepted); err != nil {
		t.Fatal(err)
	}
	f.Counters[LocalhostNodePortsAccepted] = 7
	want := `# HELP kubeproxy_iptables_localhost_nodeports_accepted_packets_total Number of packets accepted on nodeports of loopback interface
# TYPE kubeproxy_iptables_localhost_nodeports_accepted_packets_total counter
kubeproxy_iptables_localhost_nodeports_accepted_packets_total 7
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
}

func TestFake(t *testing.T) {
	f := NewFake()
	if _, err := f.Packets("x"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Packets of a missing counter: %v", err)
	}
	f.Unsupported = true
	if err := f.Ensure("x"); err == nil {
		t.Fatal("Ensure on an unsupported kernel succeeded")
	}
}

func TestRequestRejectsBadNames(t *testing.T) {
	n := &Netlink{}
	for _, name := range []string{"", strings.Repeat("a", 32)} {
		if _, err := n.request(msgGet, 0, name); err == nil {
			t.Errorf("name %q accepted", name)
		}
	}
}
