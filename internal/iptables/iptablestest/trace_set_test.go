package iptablestest

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
)

// memberSets is a test IPSets: each set holds members written as the
// looked-up fields joined by "," ("10.96.0.10,tcp:80").
type memberSets map[string][]string

func (s memberSets) MatchSet(name string, dirs []string, p SetPacket) (bool, error) {
	members, ok := s[name]
	if !ok {
		return false, errors.New("no such set")
	}
	var parts []string
	for i, d := range dirs {
		addr, port := p.Dst, p.DstPort
		if d == "src" {
			addr, port = p.Src, p.SrcPort
		}
		if i == 1 {
			parts = append(parts, fmt.Sprintf("%s:%d", p.Protocol, port))
		} else {
			parts = append(parts, addr.String())
		}
	}
	key := strings.Join(parts, ",")
	for _, m := range members {
		if m == key {
			return true, nil
		}
	}
	return false, nil
}

func TestTraceSetMatch(t *testing.T) {
	rules := "*nat\n:KUBE-MARK-MASQ - [0:0]\n-A KUBE-MARK-MASQ -j MARK --or-mark 0x4000\n" +
		"-A PREROUTING -m set --match-set KUBE-CLUSTER-IP dst,dst -j KUBE-MARK-MASQ\n" +
		"-A POSTROUTING -m set --match-set KUBE-LOOP-BACK dst,dst,src -j MASQUERADE\n" +
		"-A POSTROUTING -m set ! --match-set KUBE-CLUSTER-IP dst,dst -m mark --mark 0x4000/0x4000 -j MASQUERADE\nCOMMIT\n" +
		"*filter\n-A INPUT -m set --match-set KUBE-FW dst,dst -j DROP\nCOMMIT\n"
	sets := memberSets{"KUBE-CLUSTER-IP": {"10.96.0.10,tcp:80"}, "KUBE-LOOP-BACK": {"10.244.1.2,tcp:8080,10.244.1.2"}, "KUBE-FW": {"10.96.0.11,tcp:80"}}
	f := NewFake()
	mustRestore(t, f, runner.IPv4, rules)
	cases := []struct {
		name      string
		pkt       Packet
		hooks     []string
		wantMark  uint32
		wantMasq  bool
		wantDrop  bool
		wantError string
	}{
		{name: "member marks", pkt: Packet{SrcIP: podIP, DstIP: ip("10.96.0.10"), DstPort: 80}, hooks: []string{"nat/PREROUTING"}, wantMark: 0x4000},
		{name: "other port is no member", pkt: Packet{SrcIP: podIP, DstIP: ip("10.96.0.10"), DstPort: 81}, hooks: []string{"nat/PREROUTING"}},
		{name: "udp is no member", pkt: Packet{SrcIP: podIP, DstIP: ip("10.96.0.10"), DstPort: 80, Protocol: "udp"}, hooks: []string{"nat/PREROUTING"}},
		{name: "three dimensions: hairpin", pkt: Packet{SrcIP: ip("10.244.1.2"), DstIP: ip("10.244.1.2"), DstPort: 8080}, hooks: []string{"nat/POSTROUTING"}, wantMasq: true},
		{name: "negated match", pkt: Packet{SrcIP: podIP, DstIP: ip("10.244.1.2"), DstPort: 8080, Mark: 0x4000}, hooks: []string{"nat/POSTROUTING"}, wantMasq: true, wantMark: 0x4000},
		{name: "filter drop", pkt: Packet{SrcIP: podIP, DstIP: ip("10.96.0.11"), DstPort: 80}, hooks: []string{"filter/INPUT"}, wantDrop: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.pkt.Sets = sets
			res, err := f.TraceHooks(runner.IPv4, c.pkt, c.hooks...)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Paths) != 1 {
				t.Fatalf("paths %+v, want 1", res.Paths)
			}
			p := res.Paths[0]
			if p.Mark != c.wantMark || p.Masquerade != c.wantMasq || res.Dropped != c.wantDrop {
				t.Errorf("path %+v, want mark %#x masquerade %v drop %v", p, c.wantMark, c.wantMasq, c.wantDrop)
			}
		})
	}
	t.Run("unknown set fails the trace", func(t *testing.T) {
		_, err := f.TraceHooks(runner.IPv4, Packet{SrcIP: podIP, DstIP: ip("10.96.0.10"), DstPort: 80, Sets: memberSets{}}, "nat/PREROUTING")
		if err == nil || !strings.Contains(err.Error(), "KUBE-CLUSTER-IP") {
			t.Errorf("err = %v, want one naming the set", err)
		}
	})
}

func TestTraceSetOptionsNotModelled(t *testing.T) {
	f := NewFake()
	mustRestore(t, f, runner.IPv4, "*nat\n-A PREROUTING -m set --match-set S dst --return-nomatch -j RETURN\nCOMMIT\n")
	_, err := f.Trace(runner.IPv4, Packet{SrcIP: podIP, DstIP: ip("10.96.0.10"), DstPort: 80, Sets: memberSets{"S": nil}})
	if err == nil || !strings.Contains(err.Error(), "--return-nomatch") {
		t.Errorf("err = %v, want --return-nomatch not modelled", err)
	}
}
