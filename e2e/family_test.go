//go:build e2e

package e2e

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/e2e/framework"
)

// TestDualStackWithoutClusterCIDR: a dual-stack cluster configured the
// Calico way (no clusterCIDR, pod traffic told by interface name) gets its
// IPv6 Services programmed, in every host mode. switchyard once programmed
// a second family only when it saw a cluster CIDR of it; kube-proxy runs
// dual-stack whenever the node supports both families.
func TestDualStackWithoutClusterCIDR(t *testing.T) {
	for _, mode := range e2eModes() {
		if mode == "ipvs" {
			continue // the VM runs TestDataplane only
		}
		t.Run(mode, func(t *testing.T) {
			env := framework.Setup(t, suite, framework.TopologySpec{Pods: 2, Shape: framework.ShapeDual})
			// Later flags win: no cluster CIDR at all.
			d := env.StartDaemon(t, "--proxy-mode="+mode, "--cluster-cidr=",
				"--detect-local-mode=InterfaceNamePrefix", "--pod-interface-name-prefix=br")
			if err := d.WaitHealthy(converge); err != nil {
				t.Fatalf("daemon not healthy: %v\n%s", err, d.LogTail(40))
			}
			if log := readLog(t, d); !strings.Contains(log, "running in dual-stack mode") {
				t.Errorf("the daemon did not say it runs dual-stack:\n%s", d.LogTail(40))
			}
			svc := env.EchoService(t, "nocidr", env.Topo.Pods...)
			for _, f := range env.Topo.Families() {
				ip := framework.ClusterIPOf(svc, f)
				if ip == "" {
					t.Fatalf("service has no %s cluster IP: %v", f, svc.Spec.ClusterIPs)
				}
				view := env.Topo.For(f)
				waitServed(t, view.ClientNS, "tcp", hostPort(ip, 80), podNames(view.Pods), true)
				waitServed(t, view.Pods[0].NS, "udp", hostPort(ip, 80), podNames(view.Pods), true)
			}
			if n := counter(t, d, "switchyard_skipped_family_objects_total"); n != 0 {
				t.Errorf("%v objects skipped for their family on a dual-stack node", n)
			}
			if f := env.Topo.Families(); len(f) != 2 || f[1] != corev1.IPv6Protocol {
				t.Fatalf("topology families %v", f)
			}
		})
	}
}
