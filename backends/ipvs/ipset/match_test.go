package ipset

import (
	"net/netip"
	"testing"
)

func TestSetMatch(t *testing.T) {
	saved := `create IPPORT hash:ip,port family inet hashsize 1024 maxelem 65536
add IPPORT 10.96.0.10,tcp:80
create IPPORTIP hash:ip,port,ip family inet hashsize 1024 maxelem 65536
add IPPORTIP 10.244.1.2,tcp:8080,10.244.1.2
create IPPORTNET hash:ip,port,net family inet hashsize 1024 maxelem 65536
add IPPORTNET 198.51.100.1,tcp:80,203.0.113.0/24
create NET hash:net family inet hashsize 1024 maxelem 65536
add NET 10.244.0.0/16
create PORTS bitmap:port range 0-65535
add PORTS 30080
create SIX hash:ip,port family inet6 hashsize 1024 maxelem 65536
add SIX fd00::10,tcp:80
create MAC hash:mac hashsize 1024
`
	sets, err := ParseSave([]byte(saved))
	if err != nil {
		t.Fatal(err)
	}
	a := netip.MustParseAddr
	pkt := func(src, dst string, proto string, dport uint16) Packet {
		return Packet{Src: a(src), Dst: a(dst), Proto: proto, SrcPort: 40000, DstPort: dport}
	}
	cases := []struct {
		set  string
		dirs []string
		p    Packet
		want bool
		bad  bool
	}{
		{"IPPORT", []string{"dst", "dst"}, pkt("10.244.1.5", "10.96.0.10", "tcp", 80), true, false},
		{"IPPORT", []string{"dst", "dst"}, pkt("10.244.1.5", "10.96.0.10", "udp", 80), false, false},
		{"IPPORT", []string{"dst", "dst"}, pkt("10.244.1.5", "10.96.0.10", "tcp", 81), false, false},
		{"IPPORT", []string{"src", "dst"}, pkt("10.244.1.5", "10.96.0.10", "tcp", 80), false, false},
		{"IPPORTIP", []string{"dst", "dst", "src"}, pkt("10.244.1.2", "10.244.1.2", "tcp", 8080), true, false},
		{"IPPORTIP", []string{"dst", "dst", "src"}, pkt("10.244.1.3", "10.244.1.2", "tcp", 8080), false, false},
		{"IPPORTNET", []string{"dst", "dst", "src"}, pkt("203.0.113.9", "198.51.100.1", "tcp", 80), true, false},
		{"IPPORTNET", []string{"dst", "dst", "src"}, pkt("192.0.2.9", "198.51.100.1", "tcp", 80), false, false},
		{"IPPORTNET", []string{"dst", "dst", "src"}, pkt("203.0.113.9", "198.51.100.1", "tcp", 81), false, false},
		{"NET", []string{"src"}, pkt("10.244.7.7", "10.96.0.10", "tcp", 80), true, false},
		{"NET", []string{"src"}, pkt("10.245.7.7", "10.96.0.10", "tcp", 80), false, false},
		{"PORTS", []string{"dst"}, pkt("203.0.113.1", "192.168.0.10", "tcp", 30080), true, false},
		{"PORTS", []string{"dst"}, pkt("203.0.113.1", "192.168.0.10", "sctp", 30081), false, false},
		{"SIX", []string{"dst", "dst"}, pkt("10.244.1.5", "10.96.0.10", "tcp", 80), false, false},
		{"SIX", []string{"dst", "dst"}, pkt("fd00::1", "fd00::10", "tcp", 80), true, false},
		{"IPPORT", []string{"dst"}, pkt("10.244.1.5", "10.96.0.10", "tcp", 80), false, true},
		{"IPPORT", []string{"dst", "up"}, pkt("10.244.1.5", "10.96.0.10", "tcp", 80), false, true},
		{"MAC", []string{"src"}, pkt("10.244.1.5", "10.96.0.10", "tcp", 80), false, true},
	}
	for _, c := range cases {
		got, err := sets[c.set].Match(c.dirs, c.p)
		if (err != nil) != c.bad || got != c.want {
			t.Errorf("%s %v %+v = %v, %v; want %v (error: %v)", c.set, c.dirs, c.p, got, err, c.want, c.bad)
		}
	}
}
