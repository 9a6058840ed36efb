package flowtest

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/proxier"
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
	// InInterface is the interface the packet came in on: the pods'
	// bridge or veth for pod traffic, the uplink for outside traffic, ""
	// for the node's own (SrcLocal) packets, which have none.
	InInterface string
}

// String describes the packet for test failures.
func (p Packet) String() string {
	from := "remote"
	if p.SrcLocal {
		from = "node-local"
	}
	return fmt.Sprintf("%s %s packet %s (in %q) -> %s", from, p.Protocol, p.SrcIP, p.InInterface, netip.AddrPortFrom(p.DstIP, p.DstPort))
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
	// ByDetector overrides Expect for the named Variants, where the
	// local-traffic detector changes the outcome.
	ByDetector map[string]Expect
}

// expectFor is the case's expectation under a variant.
func (c Case) expectFor(variant string) Expect {
	if e, ok := c.ByDetector[variant]; ok {
		return e
	}
	return c.Expect
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
	// LocalDetector is the local-traffic detector (--detect-local-mode):
	// in Fixture, ClusterCIDR with the cluster CIDRs of both families, so
	// pod traffic to a cluster IP is not masqueraded.
	LocalDetector proxier.LocalDetector
	// MasqueradeAll is --masquerade-all (false in Fixture).
	MasqueradeAll bool
	// Families are the families the backend programs, primary first:
	// both in Fixture, the shape's in ShapeFixture.
	Families []v1.IPFamily
}

// Run runs every case of Cases as a subtest of t against m, a model of
// the backend built from Fixture (ClusterCIDR detection).
func Run(t *testing.T, m Model, deviations ...Deviation) {
	t.Helper()
	RunVariant(t, Variants()[0], m, deviations...)
}

// RunDetectors runs the table once per local-traffic detector (Variants):
// build must return a model of the backend built from the NodeConfig and
// synced with the State it is given (FixtureFor the variant).
func RunDetectors(t *testing.T, build func(t *testing.T, state *proxier.State, node NodeConfig) Model, deviations ...Deviation) {
	t.Helper()
	for _, v := range Variants() {
		t.Run(v.Name, func(t *testing.T) {
			state, node := FixtureFor(v)
			RunVariant(t, v, build(t, state, node), deviations...)
		})
	}
}

// Deviation is a backend's documented departure from the table: under
// Variant, Case is expected to end as Expect instead, for the reason Why
// (which the backend's documentation gives too). The deviation is
// checked like any row; one that names no row fails the run.
type Deviation struct {
	Variant, Case string
	Expect        Expect
	Why           string
}

// RunVariant runs the table under one variant against m, a model of the
// backend built from FixtureFor(v), with the backend's deviations.
func RunVariant(t *testing.T, v Variant, m Model, deviations ...Deviation) {
	t.Helper()
	runCases(t, v, CasesFor(v), m, deviations, true)
}

// runCases runs cases under variant v with the deviations of v folded
// in; strict fails a deviation of v that names no case.
func runCases(t *testing.T, v Variant, cases []Case, m Model, deviations []Deviation, strict bool) {
	t.Helper()
	for _, d := range deviations {
		i := slices.IndexFunc(cases, func(c Case) bool { return c.Name == d.Case })
		if i < 0 && d.Variant == v.Name && strict {
			t.Errorf("deviation %q names no case", d.Case)
		}
		if i >= 0 && d.Variant == v.Name {
			cases[i].Expect = d.Expect
		}
	}
	for _, c := range cases {
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
