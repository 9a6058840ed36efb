package iptablestest

import (
	"net/netip"
	"strings"
)

// moduleOptions lists the options of the match modules the fake knows;
// nil for a module it does not know (whose options are then taken as
// written, and which Trace refuses).
func moduleOptions(module string) []string {
	switch module {
	case "tcp":
		return []string{"--dport", "--sport", "--syn", "--tcp-flags", "--tcp-option"}
	case "udp":
		return []string{"--dport", "--sport"}
	case "sctp":
		return []string{"--dport", "--sport", "--chunk-types"}
	case "multiport":
		return []string{"--dports", "--sports", "--ports"}
	case "comment":
		return []string{"--comment"}
	case "addrtype":
		return []string{"--src-type", "--dst-type", "--limit-iface-in", "--limit-iface-out"}
	case "mark":
		return []string{"--mark"}
	case "statistic":
		return []string{"--mode", "--probability", "--every", "--packet"}
	case "recent":
		return []string{"--name", "--set", "--rcheck", "--update", "--remove", "--seconds", "--reap",
			"--hitcount", "--rttl", "--rsource", "--rdest", "--mask"}
	case "conntrack":
		return []string{"--ctstate", "--ctproto", "--ctorigsrc", "--ctorigdst", "--ctreplsrc", "--ctrepldst",
			"--ctorigsrcport", "--ctorigdstport", "--ctreplsrcport", "--ctrepldstport", "--ctstatus",
			"--ctexpire", "--ctdir"}
	case "state":
		return []string{"--state"}
	case "set":
		return []string{"--match-set", "--return-nomatch", "--update-counters", "--update-subcounters",
			"--packets-eq", "--packets-lt", "--packets-gt", "--bytes-eq", "--bytes-lt", "--bytes-gt"}
	case "icmp":
		return []string{"--icmp-type"}
	case "icmp6", "icmpv6":
		return []string{"--icmpv6-type"}
	}
	return nil
}

func knownModule(module string) bool { return moduleOptions(module) != nil }

func moduleTakes(module, opt string) bool {
	known := moduleOptions(module)
	if known == nil {
		return true
	}
	return contains(known, opt)
}

// targetOptions lists the options of the targets the fake knows; nil for
// verdicts and chains (no options) and for unknown extension targets.
func targetOptions(target string) []string {
	switch target {
	case "DNAT":
		return []string{"--to-destination", "--random", "--persistent"}
	case "SNAT":
		return []string{"--to-source", "--random", "--random-fully", "--persistent"}
	case "MASQUERADE":
		return []string{"--to-ports", "--random", "--random-fully"}
	case "REDIRECT":
		return []string{"--to-ports", "--random"}
	case "MARK":
		return []string{"--set-xmark", "--set-mark", "--or-mark", "--and-mark", "--xor-mark"}
	case "REJECT":
		return []string{"--reject-with"}
	case "LOG":
		return []string{"--log-prefix", "--log-level", "--log-tcp-sequence", "--log-tcp-options",
			"--log-ip-options", "--log-uid"}
	}
	return nil
}

// extensionTarget is a target that is neither a verdict nor a chain,
// with the tables it is valid in (nil: any).
func extensionTarget(target string) (tables []string, ok bool) {
	switch target {
	case "DNAT", "SNAT", "MASQUERADE", "REDIRECT":
		return []string{"nat"}, true
	case "REJECT":
		return []string{"filter", "mangle", "raw"}, true
	case "NOTRACK", "CT":
		return []string{"raw"}, true
	case "TPROXY", "CHECKSUM", "TCPMSS":
		return []string{"mangle", "filter"}, true
	case "MARK", "CONNMARK", "LOG", "NFLOG", "NFQUEUE", "TRACE", "AUDIT":
		return nil, true
	}
	return nil, false
}

// verdict reports whether target is a built-in verdict.
func verdict(target string) bool {
	switch target {
	case "ACCEPT", "DROP", "RETURN", "QUEUE":
		return true
	}
	return false
}

func targetTakes(target, opt string) bool {
	if verdict(target) {
		return false
	}
	if _, ext := extensionTarget(target); !ext {
		return false // a chain: takes no options
	}
	known := targetOptions(target)
	return known == nil || contains(known, opt)
}

// canonicalOption maps long option spellings to the short ones.
func canonicalOption(name string) string {
	switch name {
	case "--destination-port":
		return "--dport"
	case "--source-port":
		return "--sport"
	case "--destination-ports":
		return "--dports"
	case "--source-ports":
		return "--sports"
	}
	return name
}

// protocolName normalises a -p value: lower case, numbers to names.
func protocolName(p string) string {
	switch p = strings.ToLower(p); p {
	case "6":
		return "tcp"
	case "17":
		return "udp"
	case "132":
		return "sctp"
	case "1":
		return "icmp"
	case "58", "ipv6-icmp", "icmp6":
		return "icmpv6"
	case "0":
		return "all"
	}
	return p
}

// normalizeAddr gives an address or CIDR as a masked prefix
// ("10.0.0.1" -> "10.0.0.1/32"); unparsable values are returned as is.
func normalizeAddr(s string) string {
	if p, err := parseAddr(s); err == nil {
		return p.String()
	}
	return s
}

// parseAddr parses "ip" or "ip/len" into a masked prefix.
func parseAddr(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, err
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
