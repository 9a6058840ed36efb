package userspace

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// step is one action on a balancer: an update (when eps is set), a clock
// step, or a pick by client (skipping skip) that must return want ("" for
// no endpoint).
type step struct {
	eps      []string
	affinity time.Duration
	advance  time.Duration
	client   string
	skip     []string
	want     string
}

func update(affinity time.Duration, eps ...string) step {
	return step{eps: append([]string{}, eps...), affinity: affinity}
}
func advance(d time.Duration) step    { return step{advance: d} }
func pickBy(client, want string) step { return step{client: client, want: want} }
func pick(want string) step           { return pickBy("10.0.0.1", want) }
func pickSkip(want string, skip ...string) step {
	return step{client: "10.0.0.1", skip: skip, want: want}
}

const (
	epA = "10.244.0.1:80"
	epB = "10.244.0.2:80"
	epC = "10.244.0.3:80"
	epD = "10.244.0.4:80"
)

func TestBalancer(t *testing.T) {
	const aff = 10 * time.Second
	tests := []struct {
		name  string
		steps []step
	}{
		{"exact round-robin in endpoint order", []step{update(0, epA, epB, epC),
			pick(epA), pick(epB), pick(epC), pick(epA), pick(epB), pick(epC)}},
		{"different clients share the rotation", []step{update(0, epA, epB),
			pickBy("10.0.0.1", epA), pickBy("10.0.0.2", epB), pickBy("10.0.0.1", epA)}},
		{"no endpoints", []step{update(0), pick("")}},
		{"update continues after the last pick", []step{update(0, epA, epB, epC),
			pick(epA), pick(epB), update(0, epA, epC, epD), pick(epC), pick(epD), pick(epA)}},
		{"update that removes the last pick", []step{update(0, epA, epB, epC),
			pick(epA), pick(epB), update(0, epA, epC), pick(epC), pick(epA)}},
		{"update after the last endpoint wraps", []step{update(0, epA, epB, epC),
			pick(epA), pick(epB), pick(epC), update(0, epA, epB), pick(epA)}},
		{"all endpoints removed, then back", []step{update(0, epA, epB),
			pick(epA), update(0), pick(""), update(0, epA, epB), pick(epB)}},
		{"skipped endpoints are passed over", []step{update(0, epA, epB, epC),
			pickSkip(epB, epA), pick(epC), pickSkip(epB, epA, epC), pickSkip("", epA, epB, epC)}},
		{"affinity pins a client", []step{update(aff, epA, epB, epC),
			pickBy("10.0.0.1", epA), pickBy("10.0.0.2", epB), pickBy("10.0.0.1", epA), pickBy("10.0.0.3", epC),
			pickBy("10.0.0.1", epA)}},
		{"affinity lasts while the client keeps coming", []step{update(aff, epA, epB, epC),
			pick(epA), advance(9 * time.Second), pick(epA), advance(9 * time.Second), pick(epA)}},
		{"affinity expires after the timeout unused", []step{update(aff, epA, epB, epC),
			pick(epA), advance(aff), pick(epB), pick(epB)}},
		{"affinity to a removed endpoint is dropped", []step{update(aff, epA, epB, epC),
			pick(epA), update(aff, epB, epC), pick(epB), pick(epB)}},
		{"a skipped pinned endpoint is replaced", []step{update(aff, epA, epB, epC),
			pick(epA), pickSkip(epB, epA), pick(epB)}},
		{"turning affinity off forgets clients", []step{update(aff, epA, epB, epC),
			pick(epA), update(0, epA, epB, epC), pick(epB), pick(epC)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
			b := newBalancer(clk)
			for i, s := range tc.steps {
				switch {
				case s.eps != nil:
					b.update(mustAddrPorts(t, s.eps...), s.affinity)
				case s.advance != 0:
					clk.Step(s.advance)
				default:
					skip := mustAddrPorts(t, s.skip...)
					got, ok := b.pick(netip.MustParseAddr(s.client), func(ep netip.AddrPort) bool { return slices.Contains(skip, ep) })
					if gotS := map[bool]string{true: got.String(), false: ""}[ok]; gotS != s.want {
						t.Fatalf("step %d: pick by %s = %q, want %q", i, s.client, gotS, s.want)
					}
				}
			}
		})
	}
}

func TestBalancerUpdateReportsRemoved(t *testing.T) {
	b := newBalancer(clocktesting.NewFakeClock(time.Now()))
	b.update(mustAddrPorts(t, epA, epB, epC), 0)
	removed := b.update(mustAddrPorts(t, epB, epD), 0)
	if want := mustAddrPorts(t, epA, epC); !slices.Equal(removed, want) {
		t.Errorf("removed = %v, want %v", removed, want)
	}
	if got := b.snapshot(); !slices.Equal(got, mustAddrPorts(t, epB, epD)) {
		t.Errorf("endpoints = %v", got)
	}
}

func TestBalancerSweepsExpiredAffinity(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	b := newBalancer(clk)
	b.update(mustAddrPorts(t, epA, epB), time.Minute)
	for i := range 100 {
		b.pick(netip.AddrFrom4([4]byte{10, 1, 0, byte(i)}), nil)
	}
	clk.Step(time.Minute)
	b.pick(netip.MustParseAddr("10.2.0.1"), nil)
	if n := len(b.sticky); n != 1 {
		t.Errorf("%d affinity entries after expiry, want 1 (the new client)", n)
	}
}

func mustAddrPorts(t *testing.T, ss ...string) []netip.AddrPort {
	t.Helper()
	out := []netip.AddrPort{}
	for _, s := range ss {
		ap, err := netip.ParseAddrPort(s)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ap)
	}
	return out
}
