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
	var r flowReader
	if !r.read(unix.AF_INET, msg[nl.SizeofNfgenmsg:]) {
		t.Fatal("the entry did not parse")
	}
	f := &r.f
	got := tupleOf(f)
	if got.proto != protoSCTP || got.origDst.String() != "10.96.0.20:9999" || got.replySrc.String() != "10.244.1.10:9998" {
		t.Errorf("parsed %+v", got)
	}
	if f.FamilyType != unix.AF_INET || f.Forward.SrcPort != 40007 || !f.Forward.SrcIP.Equal(net.ParseIP("10.244.3.5")) {
		t.Errorf("forward tuple %+v", f.Forward)
	}
	kept := cloneFlow(f)
	if r.read(unix.AF_INET, nil) {
		t.Errorf("an entry without tuples parsed")
	}
	// The reader reuses its flow; a clone keeps what it was.
	other := append([]byte(nil), tupleAttr(nl.CTA_TUPLE_ORIG, "10.244.3.6", "10.96.0.21", protoUDP, 1, 53).Serialize()...)
	other = append(other, tupleAttr(nl.CTA_TUPLE_REPLY, "10.244.1.11", "10.244.3.6", protoUDP, 5353, 1).Serialize()...)
	if !r.read(unix.AF_INET, other) || r.f.Forward.DstIP.String() != "10.96.0.21" {
		t.Fatalf("second entry: %+v", r.f.Forward)
	}
	if kept.Forward.DstIP.String() != "10.96.0.20" || kept.Reverse.SrcPort != 9998 {
		t.Errorf("the clone changed with the reader: %+v", kept)
	}
}
