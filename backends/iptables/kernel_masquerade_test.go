package iptables

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/internal/kerneltest"
	"github.com/switchyard-proxy/switchyard/proxier"
)

// TestKernelMasqueradeTCPPorts makes 3000 short connections from an
// outside client cycling through 500 source ports to a masqueraded
// NodePort whose one endpoint closes first, in iptables-nft and legacy.
// With MasqueradeTCPKeepPort a reused client port reaches the endpoint
// from the same node port, with the timestamps and sequence numbers of
// the same 4-tuple, so no TIME_WAIT socket refuses a SYN (PAWS) and no
// SYN is retransmitted. With kube-proxy's --random-fully (the default),
// on a kernel whose timestamp offsets depend on the ports, the same run
// meets PAWS refusals, which shows the check sees what the option avoids.
func TestKernelMasqueradeTCPPorts(t *testing.T) {
	kerneltest.Require(t)
	for _, mode := range kernelModes() {
		for _, tcpKeepPort := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/tcp-keep-port=%v", mode, tcpKeepPort), func(t *testing.T) {
				checkMasqueradeTCPPorts(t, mode, tcpKeepPort)
			})
		}
	}
}

func checkMasqueradeTCPPorts(t *testing.T, mode string, tcpKeepPort bool) {
	const conns, timeout = 3000, 5 * time.Second // a SYN retransmitted twice takes over 1 s
	tp := newTopology(t, 1)
	nsRun(t, tp.client, "sysctl", "-qw", "net.ipv4.ip_local_port_range=40000 40499")
	cfg := Config{Families: []v1.IPFamily{v1.IPv4Protocol}, LocalDetector: proxier.DetectByClusterCIDRs(mustPrefixes("10.244.0.0/16")...),
		MasqueradeTCPKeepPort: tcpKeepPort}
	be := newKernelBackend(t, cfg, mode, tp.node)
	web := with(svc("default", "web", "http", v1.ProtocolTCP, 80, webIP), nodePort(webNodePort))
	st := stateOf([]string{topoNodeIP}, []*proxier.ServicePort{web}, epMap{web.Name: {ep(fmt.Sprintf("%s:%d", tp.pods[0].ip, echoPort))}})
	if _, err := be.Sync(context.Background(), st, fullDiff()); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	addr := net.JoinHostPort(topoNodeIP, fmt.Sprint(webNodePort))
	r, err := kerneltest.MeasureShortConns(tp.client, tp.pods[0].ns, addr, conns, []byte("hello\n"), timeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(r)
	kerneltest.CheckMasqueradeTCPPorts(t, r, tcpKeepPort, tp.client, addr, timeout)
}
