package ruleset

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"net/netip"
	"reflect"
	"strings"
	"time"

	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"github.com/switchyard-proxy/switchyard/internal/nfnetlink"
)

// The decoder reads rules back from the kernel, for `switchyard
// explain`: the inverse of Compile. A rule decodes only if compiling the
// result gives back exactly what the kernel holds (Decode checks it), so a
// rule of another program, or one switchyard no longer writes, is never
// mistaken for a similar one: it becomes an Unknown expression, which the
// tracer refuses to guess about.

// Unknown stands for a rule read from the kernel that is not one
// switchyard writes. Names lists its netlink expressions, Reason why it
// did not decode.
type Unknown struct {
	Names  []string
	Reason string
}

// Text implements Expr.
func (u Unknown) Text(Family) string {
	return "(not understood: " + strings.Join(u.Names, " ") + ")"
}

// Compile implements Expr: an Unknown is never written.
func (u Unknown) Compile(Family) ([]expr.Any, error) {
	return nil, fmt.Errorf("rule not understood: %s", strings.Join(u.Names, " "))
}

// Eval implements Expr: the tracer cannot tell what the rule does.
func (u Unknown) Eval(*Packet, Env) (Result, error) {
	return Result{}, fmt.Errorf("rule not understood (%s): not one switchyard writes: %s", strings.Join(u.Names, " "), u.Reason)
}

// ParseExpr decodes one netlink expression of a rule dump (its
// NFTA_EXPR_NAME and NFTA_EXPR_DATA). Expressions switchyard never writes
// give an error.
func ParseExpr(f Family, name string, data []byte) (expr.Any, error) {
	if name == "byteorder" {
		return nfnetlink.ParseByteorder(data)
	}
	var e expr.Any
	switch name {
	case "payload":
		e = &expr.Payload{}
	case "meta":
		e = &expr.Meta{}
	case "cmp":
		e = &expr.Cmp{}
	case "bitwise":
		e = &expr.Bitwise{}
	case "lookup":
		e = &expr.Lookup{}
	case "fib":
		e = &expr.Fib{}
	case "ct":
		e = &expr.Ct{}
	case "immediate":
		e = &expr.Immediate{}
	case "dynset":
		e = &expr.Dynset{}
	case "masq":
		e = &expr.Masq{}
	case "reject":
		e = &expr.Reject{}
	case "nat":
		e = &expr.NAT{}
	case "numgen":
		e = &expr.Numgen{}
	default:
		return nil, fmt.Errorf("expression %q is not one switchyard writes", name)
	}
	return unmarshal(f, data, e)
}

func unmarshal(f Family, data []byte, e expr.Any) (expr.Any, error) {
	if err := expr.Unmarshal(nfproto(f), data, e); err != nil {
		return nil, err
	}
	// A verdict is an immediate that writes the verdict register.
	if imm, ok := e.(*expr.Immediate); ok && imm.Register == unix.NFT_REG_VERDICT && len(imm.Data) == 0 {
		v := &expr.Verdict{}
		return v, expr.Unmarshal(nfproto(f), data, v)
	}
	return e, nil
}

func nfproto(f Family) byte {
	if f == IPv6 {
		return unix.NFPROTO_IPV6
	}
	return unix.NFPROTO_IPV4
}

// Decode turns a rule's netlink expressions back into the typed
// expressions that compile to them. It fails when there are none, or
// when compiling them does not give back exactly in.
func Decode(f Family, in []expr.Any) ([]Expr, error) {
	d := &decoder{f: f, in: in}
	var out []Expr
	for d.i < len(in) {
		start := d.i
		e, err := d.next()
		if err != nil {
			return nil, fmt.Errorf("at expression %d (%T): %w", start, in[start], err)
		}
		out = append(out, e)
	}
	back, err := R(out...).Compile(f)
	if err != nil {
		return nil, err
	}
	if err := sameExprs(f, back, in); err != nil {
		return nil, err
	}
	return out, nil
}

// sameExprs compares compiled expressions with the kernel's, both taken
// through the same wire encoding and decoding.
func sameExprs(f Family, compiled, kernel []expr.Any) error {
	if len(compiled) != len(kernel) {
		return fmt.Errorf("decodes to %d expressions, the kernel holds %d", len(compiled), len(kernel))
	}
	for i, c := range compiled {
		wire, err := expr.MarshalExprData(nfproto(f), c)
		if err != nil {
			return err
		}
		back, err := ParseExpr(f, ExprName(c), wire)
		if err != nil {
			return err
		}
		if !reflect.DeepEqual(normalized(back), normalized(kernel[i])) {
			return fmt.Errorf("expression %d: decodes to %+v, the kernel holds %+v", i, back, kernel[i])
		}
	}
	return nil
}

// normalized drops what the kernel answers but a sender never sets (set
// identifiers of the transaction that created them, range ends equal to
// their starts) and names registers
// as they are sent: the kernel dumps a 32-bit register that starts a
// 128-bit one (NFT_REG32_00, _04, ...) by the 128-bit name (NFT_REG_1,
// _2, ...).
func normalized(e expr.Any) expr.Any {
	v := reflect.New(reflect.TypeOf(e).Elem())
	v.Elem().Set(reflect.ValueOf(e).Elem())
	st := v.Elem()
	for i := range st.NumField() {
		f, name := st.Field(i), st.Type().Field(i).Name
		switch {
		case name == "SetID":
			f.SetUint(0)
		case f.Kind() == reflect.Uint32 && strings.Contains(name, "Reg"):
			f.SetUint(uint64(reg32Name(uint32(f.Uint()))))
		}
	}
	if nat, ok := v.Interface().(*expr.NAT); ok {
		// A range without an end is a single value: the kernel
		// answers with the end set to the start.
		nat.RegAddrMax = cmp.Or(nat.RegAddrMax, nat.RegAddrMin)
		nat.RegProtoMax = cmp.Or(nat.RegProtoMax, nat.RegProtoMin)
	}
	return v.Interface().(expr.Any)
}

// reg32Name names a register the kernel dumped as NFT_REG_1..4 by its
// first 32-bit register.
func reg32Name(r uint32) uint32 {
	if r >= unix.NFT_REG_1 && r <= unix.NFT_REG_4 {
		return reg32 + (r-unix.NFT_REG_1)*4
	}
	return r
}

// ExprName is the netlink name of an expression (ParseExpr's name).
func ExprName(e expr.Any) string {
	switch e.(type) {
	case *expr.Payload:
		return "payload"
	case *expr.Meta:
		return "meta"
	case *expr.Cmp:
		return "cmp"
	case *expr.Bitwise:
		return "bitwise"
	case *expr.Lookup:
		return "lookup"
	case *expr.Fib:
		return "fib"
	case *expr.Ct:
		return "ct"
	case *expr.Immediate, *expr.Verdict:
		return "immediate"
	case *expr.Dynset:
		return "dynset"
	case *expr.Masq:
		return "masq"
	case *expr.Reject:
		return "reject"
	case *expr.NAT:
		return "nat"
	case *expr.Numgen:
		return "numgen"
	case *expr.Byteorder:
		return "byteorder"
	}
	return fmt.Sprintf("%T", e)
}

// decoder walks a rule's expressions; each Expr compiles to a short,
// fixed pattern (see compile.go), recognised by its first expression.
type decoder struct {
	f  Family
	in []expr.Any
	i  int
}

// take returns the next expression if it is of type T.
func take[T expr.Any](d *decoder) (T, bool) {
	var zero T
	if d.i >= len(d.in) {
		return zero, false
	}
	e, ok := d.in[d.i].(T)
	if ok {
		d.i++
	}
	return e, ok
}

func (d *decoder) next() (Expr, error) {
	switch e := d.in[d.i].(type) {
	case *expr.Payload:
		return d.loaded()
	case *expr.Meta:
		return d.meta(e)
	case *expr.Fib:
		return d.fib()
	case *expr.Ct:
		return d.ct()
	case *expr.Verdict:
		d.i++
		return verdictOf(e)
	case *expr.Masq:
		d.i++
		return Masquerade{FullyRandom: e.FullyRandom}, nil
	case *expr.Reject:
		d.i++
		return Reject{TCPReset: e.Type == unix.NFT_REJECT_TCP_RST}, nil
	case *expr.Numgen:
		return d.numgen()
	case *expr.Immediate:
		return d.dnatTo()
	}
	return nil, fmt.Errorf("no expression of switchyard starts so")
}

func (d *decoder) meta(m *expr.Meta) (Expr, error) {
	switch m.Key {
	case expr.MetaKeyL4PROTO:
		return d.loaded()
	case expr.MetaKeyIIFNAME:
		return d.iifname()
	case expr.MetaKeyMARK:
		return d.mark()
	}
	return nil, fmt.Errorf("meta key %d", m.Key)
}

func verdictOf(v *expr.Verdict) (Expr, error) {
	kinds := map[expr.VerdictKind]string{
		expr.VerdictJump: "jump", expr.VerdictGoto: "goto", expr.VerdictReturn: "return",
		expr.VerdictDrop: "drop", expr.VerdictAccept: "accept",
	}
	k, ok := kinds[v.Kind]
	if !ok {
		return nil, fmt.Errorf("verdict %d", v.Kind)
	}
	return Do{Kind: k, Chain: v.Chain}, nil
}

// fieldOf recognises a load of a packet field.
func (d *decoder) fieldOf(e expr.Any) (Field, bool) {
	saddr, daddr := uint32(12), uint32(16)
	if d.f == IPv6 {
		saddr, daddr = 8, 24
	}
	switch x := e.(type) {
	case *expr.Meta:
		return FieldL4Proto, x.Key == expr.MetaKeyL4PROTO && !x.SourceRegister
	case *expr.Payload:
		switch {
		case x.Base == expr.PayloadBaseTransportHeader && x.Offset == 2:
			return FieldDport, true
		case x.Base == expr.PayloadBaseNetworkHeader && x.Offset == saddr:
			return FieldSaddr, true
		case x.Base == expr.PayloadBaseNetworkHeader && x.Offset == daddr:
			return FieldDaddr, true
		}
	}
	return 0, false
}

// loaded decodes what follows loads of packet fields: a comparison, a
// set lookup, a verdict map or a dynamic set update.
func (d *decoder) loaded() (Expr, error) {
	var key Fields
	for d.i < len(d.in) {
		fl, ok := d.fieldOf(d.in[d.i])
		if !ok {
			break
		}
		key, d.i = append(key, fl), d.i+1
	}
	if d.i >= len(d.in) {
		return nil, fmt.Errorf("loads without a use")
	}
	switch x := d.in[d.i].(type) {
	case *expr.Lookup:
		d.i++
		if x.IsDestRegSet {
			return VMap{Key: key, Map: x.SetName}, nil
		}
		return Lookup{Key: key, Set: x.SetName, Neq: x.Invert}, nil
	case *expr.Dynset:
		d.i++
		return Update{Set: x.SetName, Key: key, Timeout: uint32(x.Timeout / time.Second)}, nil
	}
	if len(key) != 1 {
		return nil, fmt.Errorf("%d fields compared", len(key))
	}
	return d.cmp(key[0])
}

// cmp decodes "field [& mask] ==/!= value".
func (d *decoder) cmp(fl Field) (Expr, error) {
	bits := -1
	if bw, ok := take[*expr.Bitwise](d); ok {
		bits = maskBits(bw.Mask)
	}
	c, ok := take[*expr.Cmp](d)
	if !ok {
		return nil, fmt.Errorf("load of field %d not compared", fl)
	}
	out := Cmp{Field: fl, Neq: c.Op == expr.CmpOpNeq}
	switch fl {
	case FieldSaddr, FieldDaddr:
		a, ok := netip.AddrFromSlice(c.Data)
		if !ok {
			return nil, fmt.Errorf("address of %d bytes", len(c.Data))
		}
		if bits < 0 {
			bits = a.BitLen()
		}
		out.Prefix = netip.PrefixFrom(a, bits)
	case FieldL4Proto:
		out.Num = uint32(c.Data[0])
	case FieldDport:
		out.Num = uint32(binaryutil.BigEndian.Uint16(c.Data))
	}
	return out, nil
}

// maskBits is the length of a prefix mask (leading ones).
func maskBits(mask []byte) int {
	n := 0
	for _, b := range mask {
		for i := 7; i >= 0 && b&(1<<i) != 0; i-- {
			n++
		}
		if b != 0xff {
			break
		}
	}
	return n
}

func (d *decoder) iifname() (Expr, error) {
	d.i++
	c, ok := take[*expr.Cmp](d)
	if !ok {
		return nil, fmt.Errorf("iifname not compared")
	}
	name := strings.TrimRight(string(c.Data), "\x00")
	return IifName{Name: name, Prefix: len(c.Data) < ifNameSize, Neq: c.Op == expr.CmpOpNeq}, nil
}

// mark decodes MarkClear (load, and, compare with 0) and MarkSet (load,
// and-xor, store).
func (d *decoder) mark() (Expr, error) {
	d.i++
	bw, ok := take[*expr.Bitwise](d)
	if !ok || len(bw.Mask) != 4 || len(bw.Xor) != 4 {
		return nil, fmt.Errorf("mark load without a 32-bit mask")
	}
	mask, xor := binary.NativeEndian.Uint32(bw.Mask), binary.NativeEndian.Uint32(bw.Xor)
	if _, ok := take[*expr.Cmp](d); ok {
		return MarkClear{Bit: mask}, nil
	}
	if m, ok := take[*expr.Meta](d); ok && m.Key == expr.MetaKeyMARK && m.SourceRegister {
		return MarkSet{Bit: xor, Xor: mask == ^uint32(0)}, nil
	}
	return nil, fmt.Errorf("mark neither compared nor set")
}

func (d *decoder) fib() (Expr, error) {
	f, _ := take[*expr.Fib](d)
	c, ok := take[*expr.Cmp](d)
	if !ok {
		return nil, fmt.Errorf("fib not compared")
	}
	fl := FieldDaddr
	if f.FlagSADDR {
		fl = FieldSaddr
	}
	return FibLocal{Field: fl, Neq: c.Op == expr.CmpOpNeq}, nil
}

// ct decodes CtState and CtDNAT: load, and with one bit, != 0.
func (d *decoder) ct() (Expr, error) {
	ct, _ := take[*expr.Ct](d)
	bw, ok := take[*expr.Bitwise](d)
	if !ok || len(bw.Mask) != 4 {
		return nil, fmt.Errorf("ct without a 32-bit mask")
	}
	if _, ok := take[*expr.Cmp](d); !ok {
		return nil, fmt.Errorf("ct not compared")
	}
	bit := binary.NativeEndian.Uint32(bw.Mask)
	switch {
	case ct.Key == expr.CtKeySTATUS:
		return CtDNAT{}, nil
	case bit == ctStateNew:
		return CtState{State: "new"}, nil
	case bit == ctStateInvalid:
		return CtState{State: "invalid"}, nil
	}
	return nil, fmt.Errorf("ct key %d bit %#x", ct.Key, bit)
}

// numgen decodes NumgenIs (draw, compare with 0) and DNAT (draw a slot,
// look it up in an endpoint map, DNAT).
func (d *decoder) numgen() (Expr, error) {
	ng, _ := take[*expr.Numgen](d)
	if _, ok := take[*expr.Cmp](d); ok {
		return NumgenIs{Mod: ng.Modulus}, nil
	}
	if _, ok := take[*expr.Byteorder](d); !ok {
		return nil, fmt.Errorf("numgen neither compared nor a slot")
	}
	lk, ok := take[*expr.Lookup](d)
	if !ok {
		return nil, fmt.Errorf("slot not looked up")
	}
	if _, ok := take[*expr.NAT](d); !ok {
		return nil, fmt.Errorf("slot lookup without dnat")
	}
	return DNAT{Map: lk.SetName, Offset: ng.Offset}, nil
}

// dnatTo decodes DNATTo: address and port immediates, then DNAT.
func (d *decoder) dnatTo() (Expr, error) {
	addr, _ := take[*expr.Immediate](d)
	port, ok := take[*expr.Immediate](d)
	if !ok || len(port.Data) != 2 {
		return nil, fmt.Errorf("dnat without a port")
	}
	if _, ok := take[*expr.NAT](d); !ok {
		return nil, fmt.Errorf("immediates without dnat")
	}
	a, ok := netip.AddrFromSlice(addr.Data)
	if !ok {
		return nil, fmt.Errorf("address of %d bytes", len(addr.Data))
	}
	return DNATTo{Endpoint: netip.AddrPortFrom(a, binaryutil.BigEndian.Uint16(port.Data))}, nil
}
