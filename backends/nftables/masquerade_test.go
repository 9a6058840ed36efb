package nftables_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchyard-proxy/switchyard/backends/nftables"
	"github.com/switchyard-proxy/switchyard/backends/nftables/nftablestest"
	"github.com/switchyard-proxy/switchyard/backends/nftables/ruleset"
	"github.com/switchyard-proxy/switchyard/proxier/flowtest"
)

// TestMasqueradeTCPPorts pins the masquerading chain of both families:
// by default kube-proxy's one fully-random rule; with
// MasqueradeTCPKeepPort TCP keeps the client's source port (plain
// "masquerade") and every other protocol is masqueraded fully-random.
func TestMasqueradeTCPPorts(t *testing.T) {
	head := []string{"meta mark & 0x00004000 == 0 return", "meta mark set meta mark ^ 0x00004000"}
	for _, tc := range []struct {
		tcpKeepPort bool
		want        []string
	}{
		{false, append(head, "masquerade fully-random")},
		{true, append(head, "meta l4proto tcp masquerade", "masquerade fully-random")},
	} {
		state, node := flowtest.Fixture()
		fake := nftablestest.NewFake()
		b, err := nftables.New(nftables.Config{
			Families: node.Families, LocalDetector: node.LocalDetector, Conn: fake,
			MasqueradeTCPKeepPort: tc.tcpKeepPort,
		})
		if err != nil {
			t.Fatal(err)
		}
		mustSync(t, b, state, fullDiff())
		for _, fam := range []ruleset.Family{ruleset.IPv4, ruleset.IPv6} {
			got := chainLines(fake.Dump(fam, nftables.TableName), "masquerading")
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("tcpKeepPort=%v %s: masquerading chain (-want +got):\n%s", tc.tcpKeepPort, fam, d)
			}
		}
	}
}

// chainLines returns the rule lines of one chain of an nft dump.
func chainLines(dump, chain string) []string {
	var out []string
	in := false
	for _, line := range strings.Split(dump, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "chain "+chain+" {":
			in = true
		case in && line == "}":
			return out
		case in && line != "":
			out = append(out, line)
		}
	}
	return out
}
