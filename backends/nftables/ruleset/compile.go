package ruleset

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// reg32 is the first of the kernel's sixteen 32-bit registers
// (NFT_REG32_00); a field of n bytes takes ceil(n/4) consecutive ones.
const reg32 = 8

// Compile turns a rule into its netlink expressions. Each Expr starts
// loading at the first 32-bit register: only AffinityDNAT keeps values
// across statements, and it does so within itself.
func (r Rule) Compile(f Family) ([]expr.Any, error) {
	var out []expr.Any
	for _, e := range r.Exprs {
		ex, err := e.Compile(f)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", e.Text(f), err)
		}
		out = append(out, ex...)
	}
	return out, nil
}

// load puts one field of the packet into reg.
func load(f Family, fl Field, reg uint32) (expr.Any, error) {
	net := expr.PayloadBaseNetworkHeader
	switch fl {
	case FieldSaddr:
		off := uint32(12)
		if f == IPv6 {
			off = 8
		}
		return &expr.Payload{DestRegister: reg, Base: net, Offset: off, Len: uint32(f.AddrLen())}, nil
	case FieldDaddr:
		off := uint32(16)
		if f == IPv6 {
			off = 24
		}
		return &expr.Payload{DestRegister: reg, Base: net, Offset: off, Len: uint32(f.AddrLen())}, nil
	case FieldL4Proto:
		return &expr.Meta{Key: expr.MetaKeyL4PROTO, Register: reg}, nil
	case FieldDport:
		return &expr.Payload{DestRegister: reg, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2}, nil
	}
	return nil, fmt.Errorf("field %d cannot be loaded from the packet", fl)
}

// loadConcat loads fields into consecutive registers from reg.
func loadConcat(f Family, fs Fields, reg uint32) ([]expr.Any, error) {
	var out []expr.Any
	for _, fl := range fs {
		e, err := load(f, fl, reg)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
		reg += uint32(fl.regs(f))
	}
	return out, nil
}

// Compile implements Expr.
func (c Cmp) Compile(f Family) ([]expr.Any, error) {
	ld, err := load(f, c.Field, reg32)
	if err != nil {
		return nil, err
	}
	op := expr.CmpOpEq
	if c.Neq {
		op = expr.CmpOpNeq
	}
	out := []expr.Any{ld}
	var data []byte
	switch c.Field {
	case FieldSaddr, FieldDaddr:
		p := c.Prefix.Masked()
		if !p.IsValid() || (p.Addr().Is4() != (f == IPv4)) {
			return nil, fmt.Errorf("prefix %v is not of family %s", c.Prefix, f)
		}
		data = p.Addr().AsSlice()
		if !p.IsSingleIP() {
			mask := prefixMask(p)
			out = append(out, &expr.Bitwise{SourceRegister: reg32, DestRegister: reg32, Len: uint32(len(mask)), Mask: mask, Xor: make([]byte, len(mask))})
		}
	case FieldL4Proto:
		data = []byte{uint8(c.Num)}
	case FieldDport:
		data = binaryutil.BigEndian.PutUint16(uint16(c.Num))
	default:
		return nil, fmt.Errorf("cannot compare field %d", c.Field)
	}
	return append(out, &expr.Cmp{Op: op, Register: reg32, Data: data}), nil
}

func prefixMask(p netip.Prefix) []byte {
	mask := make([]byte, p.Addr().BitLen()/8)
	for i := 0; i < p.Bits(); i++ {
		mask[i/8] |= 0x80 >> (i % 8)
	}
	return mask
}

// Compile implements Expr.
func (l Lookup) Compile(f Family) ([]expr.Any, error) {
	out, err := loadConcat(f, l.Key, reg32)
	if err != nil {
		return nil, err
	}
	return append(out, &expr.Lookup{SourceRegister: reg32, SetName: l.Set, Invert: l.Neq}), nil
}

// Compile implements Expr.
func (v VMap) Compile(f Family) ([]expr.Any, error) {
	out, err := loadConcat(f, v.Key, reg32)
	if err != nil {
		return nil, err
	}
	return append(out, &expr.Lookup{SourceRegister: reg32, DestRegister: 0, IsDestRegSet: true, SetName: v.Map}), nil
}

// rtnLocal is RTN_LOCAL, the fib address type of the node's own addresses.
const rtnLocal = 2

// Compile implements Expr.
func (fl FibLocal) Compile(Family) ([]expr.Any, error) {
	op := expr.CmpOpEq
	if fl.Neq {
		op = expr.CmpOpNeq
	}
	return []expr.Any{
		&expr.Fib{Register: reg32, ResultADDRTYPE: true, FlagSADDR: fl.Field == FieldSaddr, FlagDADDR: fl.Field != FieldSaddr},
		&expr.Cmp{Op: op, Register: reg32, Data: binaryutil.NativeEndian.PutUint32(rtnLocal)},
	}, nil
}

// Conntrack state and status bits (nf_conntrack_common.h).
const (
	ctStateInvalid = 1
	ctStateNew     = 8
	ctStatusDNAT   = 0x20 // IPS_DST_NAT
)

// Compile implements Expr.
func (c CtState) Compile(Family) ([]expr.Any, error) {
	bit := map[string]uint32{"new": ctStateNew, "invalid": ctStateInvalid}[c.State]
	if bit == 0 {
		return nil, fmt.Errorf("unknown ct state %q", c.State)
	}
	return bitSet(&expr.Ct{Register: reg32, Key: expr.CtKeySTATE}, bit), nil
}

// Compile implements Expr.
func (CtDNAT) Compile(Family) ([]expr.Any, error) {
	return bitSet(&expr.Ct{Register: reg32, Key: expr.CtKeySTATUS}, ctStatusDNAT), nil
}

// bitSet loads a 32-bit host-order value and checks that bit is set.
func bitSet(ld expr.Any, bit uint32) []expr.Any {
	return []expr.Any{ld,
		&expr.Bitwise{SourceRegister: reg32, DestRegister: reg32, Len: 4, Mask: binaryutil.NativeEndian.PutUint32(bit), Xor: make([]byte, 4)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: reg32, Data: make([]byte, 4)},
	}
}

// Compile implements Expr.
func (m MarkClear) Compile(Family) ([]expr.Any, error) {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyMARK, Register: reg32},
		&expr.Bitwise{SourceRegister: reg32, DestRegister: reg32, Len: 4, Mask: binaryutil.NativeEndian.PutUint32(m.Bit), Xor: make([]byte, 4)},
		&expr.Cmp{Op: expr.CmpOpEq, Register: reg32, Data: make([]byte, 4)},
	}, nil
}

// Compile implements Expr: mark = (mark & mask) ^ xor.
func (m MarkSet) Compile(Family) ([]expr.Any, error) {
	mask, xor := ^m.Bit, m.Bit // OR: clear the bit, then set it
	if m.Xor {
		mask = ^uint32(0)
	}
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyMARK, Register: reg32},
		&expr.Bitwise{SourceRegister: reg32, DestRegister: reg32, Len: 4, Mask: binaryutil.NativeEndian.PutUint32(mask), Xor: binaryutil.NativeEndian.PutUint32(xor)},
		&expr.Meta{Key: expr.MetaKeyMARK, SourceRegister: true, Register: reg32},
	}, nil
}

// Compile implements Expr.
func (d Do) Compile(Family) ([]expr.Any, error) {
	kinds := map[string]expr.VerdictKind{
		"jump": expr.VerdictJump, "goto": expr.VerdictGoto, "return": expr.VerdictReturn,
		"drop": expr.VerdictDrop, "accept": expr.VerdictAccept,
	}
	k, ok := kinds[d.Kind]
	if !ok {
		return nil, fmt.Errorf("unknown verdict %q", d.Kind)
	}
	if (k == expr.VerdictJump || k == expr.VerdictGoto) != (d.Chain != "") {
		return nil, fmt.Errorf("verdict %q with chain %q", d.Kind, d.Chain)
	}
	return []expr.Any{&expr.Verdict{Kind: k, Chain: d.Chain}}, nil
}

// Compile implements Expr.
func (m Masquerade) Compile(Family) ([]expr.Any, error) {
	return []expr.Any{&expr.Masq{FullyRandom: m.FullyRandom}}, nil
}

// ICMP "port unreachable" codes.
const (
	icmpPortUnreach   = 3
	icmpv6PortUnreach = 4
)

// Compile implements Expr.
func (r Reject) Compile(f Family) ([]expr.Any, error) {
	if r.TCPReset {
		return []expr.Any{&expr.Reject{Type: unix.NFT_REJECT_TCP_RST}}, nil
	}
	code := uint8(icmpPortUnreach)
	if f == IPv6 {
		code = icmpv6PortUnreach
	}
	return []expr.Any{&expr.Reject{Type: unix.NFT_REJECT_ICMP_UNREACH, Code: code}}, nil
}

// drawSlot puts a random slot of the group in reg, in network order as
// interval keys are compared.
func drawSlot(offset, reg uint32) []expr.Any {
	return []expr.Any{
		&expr.Numgen{Register: reg, Modulus: SlotSpace, Type: unix.NFT_NG_RANDOM, Offset: offset},
		&expr.Byteorder{SourceRegister: reg, DestRegister: reg, Op: expr.ByteorderHton, Len: 4, Size: 4},
	}
}

// natTo DNATs to the address at reg and the port after it.
func natTo(f Family, reg uint32) expr.Any {
	nf := uint32(unix.NFPROTO_IPV4)
	if f == IPv6 {
		nf = unix.NFPROTO_IPV6
	}
	return &expr.NAT{Type: expr.NATTypeDestNAT, Family: nf, RegAddrMin: reg, RegProtoMin: reg + uint32(f.AddrLen()/4), Specified: true}
}

// Compile implements Expr.
func (d DNAT) Compile(f Family) ([]expr.Any, error) {
	out := drawSlot(d.Offset, reg32)
	return append(out,
		&expr.Lookup{SourceRegister: reg32, DestRegister: reg32, IsDestRegSet: true, SetName: d.Map},
		natTo(f, reg32)), nil
}

// Compile implements Expr.
func (u Update) Compile(f Family) ([]expr.Any, error) {
	out, err := loadConcat(f, u.Key, reg32)
	if err != nil {
		return nil, err
	}
	return append(out, &expr.Dynset{SrcRegKey: reg32, SetName: u.Set,
		Operation: unix.NFT_DYNSET_OP_UPDATE, Timeout: secondsDuration(u.Timeout)}), nil
}

// Compile implements Expr.
func (n NumgenIs) Compile(Family) ([]expr.Any, error) {
	if n.Mod == 0 {
		return nil, fmt.Errorf("numgen modulus 0")
	}
	return []expr.Any{
		&expr.Numgen{Register: reg32, Modulus: n.Mod, Type: unix.NFT_NG_RANDOM},
		&expr.Cmp{Op: expr.CmpOpEq, Register: reg32, Data: make([]byte, 4)},
	}, nil
}

// Compile implements Expr.
func (d DNATTo) Compile(f Family) ([]expr.Any, error) {
	a := d.Endpoint.Addr()
	if a.Is4() != (f == IPv4) {
		return nil, fmt.Errorf("endpoint %v is not of family %s", d.Endpoint, f)
	}
	port := reg32 + uint32(f.AddrLen()/4)
	return []expr.Any{
		&expr.Immediate{Register: reg32, Data: a.AsSlice()},
		&expr.Immediate{Register: port, Data: binaryutil.BigEndian.PutUint16(d.Endpoint.Port())},
		natTo(f, reg32),
	}, nil
}

func secondsDuration(s uint32) time.Duration { return time.Duration(s) * time.Second }

// ifNameSize is IFNAMSIZ: the kernel compares a whole name zero-padded
// to it, and a prefix on its own bytes only (as nft compiles "eth*").
const ifNameSize = 16

// Compile implements Expr.
func (i IifName) Compile(Family) ([]expr.Any, error) {
	if i.Name == "" || len(i.Name) >= ifNameSize {
		return nil, fmt.Errorf("interface name %q must have 1 to %d characters", i.Name, ifNameSize-1)
	}
	data := []byte(i.Name)
	if !i.Prefix {
		data = append(data, make([]byte, ifNameSize-len(data))...)
	}
	op := expr.CmpOpEq
	if i.Neq {
		op = expr.CmpOpNeq
	}
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyIIFNAME, Register: reg32},
		&expr.Cmp{Op: op, Register: reg32, Data: data},
	}, nil
}
