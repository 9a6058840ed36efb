package nftables_test

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchyard-proxy/switchyard/backends/nftables"
	"github.com/switchyard-proxy/switchyard/backends/nftables/nftablestest"
	"github.com/switchyard-proxy/switchyard/backends/nftables/ruleset"
	"github.com/switchyard-proxy/switchyard/proxier/flowtest"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// golden compares text with testdata/<name>.golden (or rewrites it).
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if d := cmp.Diff(string(want), got); d != "" {
		t.Errorf("%s differs (-want +got):\n%s", path, d)
	}
}

// TestGoldenFixture pins the whole table written for the flow fixture,
// both families: every service shape of the packet-flow table.
func TestGoldenFixture(t *testing.T) {
	state, node := flowtest.Fixture()
	fake := nftablestest.NewFake()
	mustSync(t, flowBackend(t, fake, node), state, fullDiff())
	golden(t, "fixture-ip", fake.Dump(ruleset.IPv4, nftables.TableName))
	golden(t, "fixture-ip6", fake.Dump(ruleset.IPv6, nftables.TableName))
}

// TestGoldenDetectors pins the local-traffic match of each
// --detect-local-mode where kube-proxy writes it ("ip saddr != CIDR" or
// `iifname != "cbr0"` before the masquerade of cluster-IP traffic, the
// match of "short-circuit pod traffic"), on two ports of the fixture: an
// IPv4 port with externalTrafficPolicy Local and an IPv6 one.
func TestGoldenDetectors(t *testing.T) {
	for _, v := range flowtest.Variants() {
		t.Run(v.Name, func(t *testing.T) {
			state, node := flowtest.FixtureFor(v)
			for name := range state.Services {
				if name.Name != "local" && name.Name != "web6" {
					delete(state.Services, name)
					delete(state.Endpoints, name)
				}
			}
			fake := nftablestest.NewFake()
			mustSync(t, flowBackend(t, fake, node), state, fullDiff())
			golden(t, "detect-"+v.Name, fake.Dump(ruleset.IPv4, nftables.TableName)+fake.Dump(ruleset.IPv6, nftables.TableName))
		})
	}
}
