package userspace

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
)

// TestCloseHandsOff: without the restart fallback, Close rewrites the
// rules so that the kernel DNATs every service address straight to its
// endpoints (no REDIRECT to the closing proxy sockets), from outside and
// from the node.
func TestCloseHandsOff(t *testing.T) {
	env := newTestEnv(t, func(c *Config) { c.RestartFallback, c.ShutdownGrace = false, 10*time.Millisecond })
	st := newState()
	addService(st, spName("web", v1.ProtocolTCP), "10.96.0.30", 80, netip.MustParseAddrPort("10.244.1.5:8080"))
	env.sync(t, st)
	nat := func() string {
		out, err := env.fake.SaveTable(context.Background(), runner.IPv4, "nat")
		if err != nil {
			t.Fatal(err)
		}
		return string(out)
	}
	if before := nat(); !strings.Contains(before, "REDIRECT") {
		t.Fatalf("no REDIRECT before Close:\n%s", before)
	}
	if err := env.b.Close(); err != nil {
		t.Fatal(err)
	}
	after := nat()
	if strings.Contains(after, "REDIRECT") || strings.Contains(after, "--to-ports") {
		t.Errorf("REDIRECT to the proxy left after Close:\n%s", after)
	}
	for _, chain := range []string{"KUBE-PORTALS-CONTAINER", "KUBE-PORTALS-HOST"} {
		if !strings.Contains(after, "-A "+chain+" -d 10.96.0.30/32 -p tcp") || !strings.Contains(after, "--to-destination 10.244.1.5:8080") {
			t.Errorf("%s does not DNAT the cluster IP to the endpoint after Close:\n%s", chain, after)
		}
	}
}
