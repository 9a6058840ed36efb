package explain

import (
	"context"
	"net/netip"
	"slices"
	"testing"

	"github.com/switchyard-proxy/switchyard/backends/ipvs"
	"github.com/switchyard-proxy/switchyard/backends/ipvs/ipvstest"
	"github.com/switchyard-proxy/switchyard/proxier"
)

// syncIPVS programs the objects with the real ipvs backend into its
// stateful fakes (IPVS, netlink, ipset, iptables).
func syncIPVS(t *testing.T, o Objects, scheduler string) *ipvstest.Kernel {
	t.Helper()
	k := ipvstest.NewKernel()
	b, err := ipvs.New(ipvs.Config{Kernel: k.Kernel, Families: o.Families, Scheduler: scheduler,
		LocalDetector: proxier.DetectByClusterCIDRs(testPodCIDR)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Sync(context.Background(), State(o), fullDiff()); err != nil {
		t.Fatal(err)
	}
	return k
}

// readIPVSFakes reads the fake node as explain reads a real one: the
// node's addresses are its own and those bound to kube-ipvs0.
func readIPVSFakes(t *testing.T, o Objects, k *ipvstest.Kernel) Dataplane {
	t.Helper()
	local := slices.Concat([]netip.Addr{testNodeIP}, k.Netlink.AllAddresses())
	dp, err := ReadIPVS(context.Background(), IPVSConfig{IPVS: k.IPVS, IPSets: k.IPSet, IPTables: k.IPTables,
		Families: o.Families, Local: local})
	if err != nil {
		t.Fatal(err)
	}
	return dp
}

func ipvsPlaneOf(t *testing.T, o Objects) Dataplane {
	t.Helper()
	return readIPVSFakes(t, o, syncIPVS(t, o, "rr"))
}
