package flowtest

import (
	"fmt"
	"net/netip"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	v1 "k8s.io/api/core/v1"
)

// Packet is the first packet of a new connection.
type Packet struct {
	Name  string
	SrcIP netip.Addr
	// SrcLocal means the packet originates on the node itself (a
	// host-network process), not in a pod or outside.
	SrcLocal bool
	DstIP    netip.Addr
	DstPort  uint16
	Protocol v1.Protocol
}

// String describes the packet for test failures.
func (p Packet) String() string {
	from := "remote"
	if p.SrcLocal {
		from = "node-local"
	}
	return fmt.Sprintf("%s %s packet %s -> %s", from, p.Protocol, p.SrcIP, netip.AddrPortFrom(p.DstIP, p.DstPort))
}

// Expect is what happens to the packet. The zero value means nothing
// does: no service matched, the packet goes on unchanged.
type Expect struct {
	// Endpoints is the set of "ip:port" ("[ip]:port" for IPv6) the
	// connection may be sent to; order does not matter.
	Endpoints []string
	// Reject: refused (ICMP unreachable / TCP reset), e.g. no endpoints.
	Reject bool
	// Drop: silently dropped, e.g. external traffic policy Local with no
	// local endpoint.
	Drop bool
	// Masquerade: the source is rewritten to the node's address. Only
	// compared when MasqChecked is set on both the case and the model's
	// answer.
	Masquerade  bool
	MasqChecked bool
}

// Case is one row of the table.
type Case struct {
	Name   string
	Packet Packet
	Expect Expect
}

// Model is a backend's answer to "what happens to this packet", computed
// from what the backend programmed into its fake kernel.
type Model interface {
	Flow(p Packet) (Expect, error)
}

// NodeConfig is the node-level configuration the Fixture assumes; a
// backend under test must be built with it.
type NodeConfig struct {
	NodeName string
	// NodeIPs are the node's addresses, one per family.
	NodeIPs []netip.Addr
	// ClusterCIDRs are the pod CIDRs (--cluster-cidr), one per family:
	// traffic from them to a cluster IP is not masqueraded.
	ClusterCIDRs []netip.Prefix
	// MasqueradeAll is --masquerade-all (false in Fixture).
	MasqueradeAll bool
}

// Run runs every case of Cases as a subtest of t against m.
func Run(t *testing.T, m Model) {
	t.Helper()
	for _, c := range Cases() {
		t.Run(c.Name, func(t *testing.T) {
			got, err := m.Flow(c.Packet)
			if err != nil {
				t.Fatalf("%s: %v", c.Packet, err)
			}
			if diff := Diff(c.Expect, got); diff != "" {
				t.Errorf("%s (-want +got):\n%s", c.Packet, diff)
			}
		})
	}
}

// Diff compares an expectation with a model's answer: endpoints as sets,
// masquerade only when both sides check it. It returns "" when they agree.
func Diff(want, got Expect) string {
	norm := func(e Expect, masq bool) Expect {
		eps := append([]string(nil), e.Endpoints...)
		sort.Strings(eps)
		e.Endpoints, e.MasqChecked = eps, false
		if !masq {
			e.Masquerade = false
		}
		return e
	}
	masq := want.MasqChecked && got.MasqChecked
	return cmp.Diff(norm(want, masq), norm(got, masq), cmpopts.EquateEmpty())
}
