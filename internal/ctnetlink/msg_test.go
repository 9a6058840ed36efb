package ctnetlink

import (
	"net/netip"
	"testing"

	"golang.org/x/sys/unix"
)

func TestNewRoundTrip(t *testing.T) {
	for _, tc := range []struct{ orig, reply Tuple }{
		{
			Tuple{UDP, netip.MustParseAddrPort("100.64.0.1:30000"), netip.MustParseAddrPort("10.96.0.10:53")},
			Tuple{UDP, netip.MustParseAddrPort("172.30.0.1:5353"), netip.MustParseAddrPort("100.64.0.1:30000")},
		},
		{
			Tuple{TCP, netip.MustParseAddrPort("[fd00::1]:40000"), netip.MustParseAddrPort("[fd00:96::10]:80")},
			Tuple{TCP, netip.MustParseAddrPort("[fd00:244::7]:8080"), netip.MustParseAddrPort("[fd00::1]:40000")},
		},
	} {
		attrs := AppendNew(nil, tc.orig, tc.reply, 3600)
		o, r, err := ParseTuples(attrs)
		if err != nil || o != tc.orig || r != tc.reply {
			t.Errorf("round trip of %v / %v: %v / %v, %v", tc.orig, tc.reply, o, r, err)
		}
	}
}

func TestParseTuplesRejectsHalfEntries(t *testing.T) {
	orig := Tuple{UDP, netip.MustParseAddrPort("100.64.0.1:1"), netip.MustParseAddrPort("10.96.0.10:53")}
	if _, _, err := ParseTuples(appendTuple(nil, ctaTupleOrig, orig)); err == nil {
		t.Error("an entry without its reply tuple parsed")
	}
	if _, _, err := ParseTuples([]byte{200, 0, 1, 0}); err == nil {
		t.Error("an attribute longer than the message parsed")
	}
}

func TestFilterLayout(t *testing.T) {
	svc := netip.MustParseAddrPort("10.96.0.10:53")
	ep := netip.MustParseAddrPort("172.30.0.1:0")
	svc6 := netip.MustParseAddrPort("[fd00:10:96::a]:53")
	ep6 := netip.MustParseAddrPort("[fd00:10:244::1]:0")
	cases := []struct {
		name       string
		family     uint8
		f          Filter
		orig, repl uint32
	}{
		{"protocol only", unix.AF_INET, Filter{Proto: UDP}, filterProto, 0},
		{"service address", unix.AF_INET, Filter{Proto: UDP, OrigDst: svc}, filterProto | filterIPDst | filterDstPort, 0},
		{"endpoint address without port", unix.AF_INET, Filter{Proto: UDP, ReplySrc: ep}, filterProto, filterProto | filterIPSrc},
		// The kernel compares IPv6 addresses inverted: only ports go.
		{"IPv6 service address", unix.AF_INET6, Filter{Proto: UDP, OrigDst: svc6}, filterProto | filterDstPort, 0},
		{"IPv6 endpoint address without port", unix.AF_INET6, Filter{Proto: UDP, ReplySrc: ep6}, filterProto, filterProto},
	}
	for _, tc := range cases {
		b := appendFilter(nil, tc.family, tc.f)
		var orig, repl uint32
		var tuples int
		_ = walkTop(b, func(typ uint16, v []byte) {
			switch typ {
			case ctaFilter:
				_ = walkTop(v, func(typ uint16, v []byte) {
					if typ == ctaFilterOrigFlags {
						orig = hostUint32(v)
					} else if typ == ctaFilterReplyFlags {
						repl = hostUint32(v)
					}
				})
			case ctaTupleOrig, ctaTupleReply:
				tuples++
			}
		})
		if orig != tc.orig || repl != tc.repl {
			t.Errorf("%s: flags orig %#x reply %#x, want %#x %#x", tc.name, orig, repl, tc.orig, tc.repl)
		}
		if want := 1 + btoi(tc.repl != 0); tuples != want {
			t.Errorf("%s: %d tuples, want %d", tc.name, tuples, want)
		}
	}
	if b := appendFilter(nil, unix.AF_INET, Filter{}); len(b) != 0 {
		t.Errorf("an empty filter wrote %d bytes", len(b))
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
