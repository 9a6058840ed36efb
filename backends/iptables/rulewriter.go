package iptables

import (
	"net/netip"
	"strconv"

	"github.com/switchyard-proxy/switchyard/proxier"
)

// ruleWriter writes rule lines into a buffer its serviceRenderer reuses,
// and hands them out as substrings of a single string. A service port's
// rules thus cost a few allocations in all instead of one per rule and
// more per part (~320k rules at 10k services x 10 endpoints). The lines
// of one flush live and die together: they are the rules of one port's
// chains (which compact drops together) or one top-level rule. Methods
// append to the line rule started; empty parts are skipped, as in rule.
type ruleWriter struct {
	buf  []byte
	ends []int // where each line written since the last flush ends
}

// rule starts the line "-A chain parts...".
func (w *ruleWriter) rule(chain string, parts ...string) *ruleWriter {
	if len(w.buf) > 0 {
		w.ends = append(w.ends, len(w.buf))
	}
	w.buf = append(w.buf, "-A "...)
	w.buf = append(w.buf, chain...)
	return w.args(parts...)
}

// args appends parts, each after a space.
func (w *ruleWriter) args(parts ...string) *ruleWriter {
	for _, p := range parts {
		if p != "" {
			w.buf = append(w.buf, ' ')
			w.buf = append(w.buf, p...)
		}
	}
	return w
}

// host appends "flag ip/32" ("ip/128" for IPv6).
func (w *ruleWriter) host(flag string, a netip.Addr) *ruleWriter {
	w.args(flag)
	w.buf = a.AppendTo(append(w.buf, ' '))
	w.buf = strconv.AppendInt(append(w.buf, '/'), int64(a.BitLen()), 10)
	return w
}

// prefix appends "flag ip/bits".
func (w *ruleWriter) prefix(flag string, p netip.Prefix) *ruleWriter {
	w.args(flag)
	w.buf = p.AppendTo(append(w.buf, ' '))
	return w
}

// local appends the local-traffic match (negated: "not local") in
// iptables-save's place for a rule without "-d": "-s CIDR", "-i br0" or
// "-i cali+", each optionally after "!" (kube-proxy's IfLocal and
// IfNotLocal).
func (w *ruleWriter) local(m proxier.LocalMatch, negated bool) *ruleWriter {
	if negated {
		w.args("!")
	}
	if m.CIDR.IsValid() {
		return w.prefix("-s", m.CIDR)
	}
	if m.Prefix {
		return w.args("-i", m.Interface+"+")
	}
	return w.args("-i", m.Interface)
}

// notLocal appends the negated local-traffic match and the destination
// in the order iptables-save prints them: "! -s CIDR -d ip/32", but
// "-d ip/32 ! -i br0" (source, destination, then input interface).
func (w *ruleWriter) notLocal(m proxier.LocalMatch, dst netip.Addr) *ruleWriter {
	if m.ByInterface() {
		return w.host("-d", dst).local(m, true)
	}
	return w.local(m, true).host("-d", dst)
}

// comment appends a comment match whose text is the concatenation of
// text, quoted as iptables-save prints it (see comment).
func (w *ruleWriter) comment(text ...string) *ruleWriter {
	w.buf = append(w.buf, ` -m comment --comment "`...)
	for _, t := range text {
		w.buf = append(w.buf, t...)
	}
	w.buf = append(w.buf, '"')
	return w
}

// match appends the destination, protocol and port match of the port's
// dispatch rules: "-d ip/32 -p tcp <comment> -m tcp --dport N" (no "-d"
// for an invalid dst), the comment's text being the concatenation of text.
func (w *ruleWriter) match(v *servicePortView, dst netip.Addr, text ...string) *ruleWriter {
	if dst.IsValid() {
		w.host("-d", dst)
	}
	return w.args("-p", v.proto).comment(text...).dport(v.proto, v.sp.Port)
}

// endpointComment appends the comment of the rules that jump to an
// endpoint: "ns/name:port -> ip:port".
func (w *ruleWriter) endpointComment(service string, ep netip.AddrPort) *ruleWriter {
	w.buf = append(w.buf, ` -m comment --comment "`...)
	w.buf = append(w.buf, service...)
	w.buf = append(w.buf, " -> "...)
	w.buf = append(ep.AppendTo(w.buf), '"')
	return w
}

// dport appends "-m proto --dport port".
func (w *ruleWriter) dport(proto string, port uint16) *ruleWriter {
	w.args("-m", proto, "--dport")
	w.buf = strconv.AppendUint(append(w.buf, ' '), uint64(port), 10)
	return w
}

// addrPort appends " ip:port" ("[ip]:port" for IPv6).
func (w *ruleWriter) addrPort(ep netip.AddrPort) *ruleWriter {
	w.buf = ep.AppendTo(append(w.buf, ' '))
	return w
}

// lines ends the lines written since the last flush and returns them in
// a slice of their own (nil if there are none).
func (w *ruleWriter) lines() []string {
	if len(w.buf) == 0 {
		return nil
	}
	return w.appendLines(make([]string, 0, len(w.ends)+1))
}

// appendLines ends the lines written since the last flush and appends
// them to dst.
func (w *ruleWriter) appendLines(dst []string) []string {
	if len(w.buf) == 0 {
		return dst
	}
	text, start := string(w.buf), 0
	for _, end := range append(w.ends, len(w.buf)) {
		dst = append(dst, text[start:end])
		start = end
	}
	w.buf, w.ends = w.buf[:0], w.ends[:0]
	return dst
}
