package ipvstest

import (
	"strings"

	"github.com/switchyard-proxy/switchyard/backends/ipvs"
	"github.com/switchyard-proxy/switchyard/internal/iptables/iptablestest"
	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
)

// Kernel is a fake node: every fake the IPVS backend needs, wired
// together (a set referenced by an iptables rule cannot be destroyed).
type Kernel struct {
	*ipvs.Kernel
	IPVS     *FakeIPVS
	Netlink  *FakeNetlink
	IPSet    *FakeIPSet
	Sysctl   *FakeSysctl
	IPTables *iptablestest.Fake
}

// NewKernel returns an empty fake node.
func NewKernel() *Kernel {
	k := &Kernel{IPVS: NewFakeIPVS(), Netlink: NewFakeNetlink(), IPSet: NewFakeIPSet(),
		Sysctl: NewFakeSysctl(), IPTables: iptablestest.NewFake()}
	k.Kernel = &ipvs.Kernel{IPVS: k.IPVS, Netlink: k.Netlink, IPSet: k.IPSet, Sysctl: k.Sysctl, IPTables: k.IPTables}
	k.IPSet.SetInUse(k.setInUse)
	return k
}

// setInUse reports whether any rule of the iptables fake matches the set.
func (k *Kernel) setInUse(name string) bool {
	for _, fam := range []runner.Family{runner.IPv4, runner.IPv6} {
		for _, table := range []string{"filter", "nat", "mangle", "raw"} {
			for _, chain := range k.IPTables.Chains(fam, table) {
				for _, r := range k.IPTables.Rules(fam, table, chain) {
					if strings.Contains(" "+strings.Join(r.Args, " ")+" ", " --match-set "+name+" ") {
						return true
					}
				}
			}
		}
	}
	return false
}
