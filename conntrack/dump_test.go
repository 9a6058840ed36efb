package conntrack

import (
	"net"
	"testing"

	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// tupleAttr builds a CTA_TUPLE_* attribute as the kernel sends it,
// with a CTA_TUPLE_ZONE (not nested) after the protocol.
func tupleAttr(typ int, src, dst string, proto uint8, sport, dport uint16) *nl.RtAttr {
	t := nl.NewRtAttr(unix.NLA_F_NESTED|typ, nil)
	ip := t.AddRtAttr(unix.NLA_F_NESTED|nl.CTA_TUPLE_IP, nil)
	ip.AddRtAttr(nl.CTA_IP_V4_SRC, net.ParseIP(src).To4())
	ip.AddRtAttr(nl.CTA_IP_V4_DST, net.ParseIP(dst).To4())
	p := t.AddRtAttr(unix.NLA_F_NESTED|nl.CTA_TUPLE_PROTO, nil)
	p.AddRtAttr(nl.CTA_PROTO_NUM, []byte{proto})
	p.AddRtAttr(nl.CTA_PROTO_SRC_PORT, nl.BEUint16Attr(sport))
	p.AddRtAttr(nl.CTA_PROTO_DST_PORT, nl.BEUint16Attr(dport))
	t.AddRtAttr(3 /* CTA_TUPLE_ZONE */, nl.BEUint16Attr(0))
	return t
}

// TestParseFlowSCTPPorts: an SCTP entry's ports are read from both
// tuples (netlink v1.3.1 drops them); other attributes are skipped.
func TestParseFlowSCTPPorts(t *testing.T) {
	msg := []byte{unix.AF_INET, nl.NFNETLINK_V0, 0, 0}
	msg = append(msg, tupleAttr(nl.CTA_TUPLE_ORIG, "10.244.3.5", "10.96.0.20", protoSCTP, 40007, 9999).Serialize()...)
	msg = append(msg, tupleAttr(nl.CTA_TUPLE_REPLY, "10.244.1.10", "10.244.3.5", protoSCTP, 9998, 40007).Serialize()...)
	msg = append(msg, nl.NewRtAttr(3 /* CTA_STATUS */, nl.BEUint32Attr(0x188)).Serialize()...)
	f, err := parseFlow(msg)
	if err != nil {
		t.Fatal(err)
	}
	got := tupleOf(f)
	if got.proto != protoSCTP || got.origDst.String() != "10.96.0.20:9999" || got.replySrc.String() != "10.244.1.10:9998" {
		t.Errorf("parsed %+v", got)
	}
	if f.FamilyType != unix.AF_INET || f.Forward.SrcPort != 40007 || !f.Forward.SrcIP.Equal(net.ParseIP("10.244.3.5")) {
		t.Errorf("forward tuple %+v", f.Forward)
	}
	if _, err := parseFlow(msg[:4]); err == nil {
		t.Errorf("an entry without tuples parsed")
	}
}
