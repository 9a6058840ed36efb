package iptables

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
	"github.com/switchyard-proxy/switchyard/internal/kerneltest"
)

// Helpers of the kernel tests: real iptables in network namespaces each
// test creates (named "syipt-<role>-<random>") and deletes when it ends,
// failed or not. Nothing here touches the host namespace.

// kernelModes are the iptables backends every kernel test runs against.
func kernelModes() []string { return []string{runner.ModeNFT, runner.ModeLegacy} }

// nsRun runs a command inside a namespace.
func nsRun(t testing.TB, ns string, args ...string) string {
	t.Helper()
	return kerneltest.Run(t, append([]string{"ip", "netns", "exec", ns}, args...)...)
}

// iptablesBin names a mode's binary of a family: "iptables-nft",
// "ip6tables-legacy-save", ...
func iptablesBin(mode string, fam runner.Family, suffix string) string {
	base := "iptables"
	if fam == runner.IPv6 {
		base = "ip6tables"
	}
	variant := "-nft"
	if mode == runner.ModeLegacy {
		variant = "-legacy"
	}
	return base + variant + suffix
}

// tableDump is a family's kernel rules: "table/chain" -> its rules in
// order, for every chain declared.
type tableDump map[string][]string

// kernelDump reads every table of a family in ns with iptables-save,
// through `ip netns exec` (independent of the runner under test).
func kernelDump(t testing.TB, ns, mode string, fam runner.Family) tableDump {
	t.Helper()
	out := nsRun(t, ns, iptablesBin(mode, fam, "-save"))
	d := tableDump{}
	var tbl string
	for _, line := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(line, "*"):
			tbl = line[1:]
		case strings.HasPrefix(line, ":"):
			name, _, _ := strings.Cut(line[1:], " ")
			if _, ok := d[tbl+"/"+name]; !ok {
				d[tbl+"/"+name] = []string{}
			}
		case strings.HasPrefix(line, "-A "):
			name, _, _ := strings.Cut(line[3:], " ")
			d[tbl+"/"+name] = append(d[tbl+"/"+name], line)
		}
	}
	return d
}

// without drops the chains (and rules in any chain) that mention one of
// the words.
func (d tableDump) without(words ...string) tableDump {
	has := func(s string) bool {
		for _, w := range words {
			if strings.Contains(s, w) {
				return true
			}
		}
		return false
	}
	out := tableDump{}
	for k, rules := range d {
		if has(k) {
			continue
		}
		out[k] = []string{}
		for _, r := range rules {
			if !has(r) {
				out[k] = append(out[k], r)
			}
		}
	}
	return out
}

// foreignChain is a chain another program owns; syncs and Cleanup must
// leave it and the jump to it alone.
const foreignChain = "SYIPT-FOREIGN"

// addForeignRules installs foreignChain in nat and filter of a family,
// with a rule and a jump from a built-in chain.
func addForeignRules(t testing.TB, ns, mode string, fam runner.Family) {
	t.Helper()
	bin := iptablesBin(mode, fam, "")
	for _, tc := range [][2]string{{"nat", "PREROUTING"}, {"filter", "INPUT"}} {
		nsRun(t, ns, bin, "-w", "-t", tc[0], "-N", foreignChain)
		nsRun(t, ns, bin, "-w", "-t", tc[0], "-A", foreignChain, "-p", "tcp", "--dport", "9", "-j", "RETURN")
		nsRun(t, ns, bin, "-w", "-t", tc[0], "-A", tc[1], "-j", foreignChain)
	}
}

// checkForeignRules asserts the foreign chains and jumps are intact.
func checkForeignRules(t testing.TB, d tableDump, fam runner.Family) {
	t.Helper()
	for _, tc := range [][2]string{{"nat", "PREROUTING"}, {"filter", "INPUT"}} {
		rules := d[tc[0]+"/"+foreignChain]
		if len(rules) != 1 || !strings.Contains(rules[0], "--dport 9 -j RETURN") {
			t.Errorf("%s: foreign chain %s/%s changed: %q", fam, tc[0], foreignChain, rules)
		}
		want := "-A " + tc[1] + " -j " + foreignChain
		found := false
		for _, r := range d[tc[0]+"/"+tc[1]] {
			found = found || r == want
		}
		if !found {
			t.Errorf("%s: foreign jump %q gone from %s/%s: %q", fam, want, tc[0], tc[1], d[tc[0]+"/"+tc[1]])
		}
	}
}

// lockWaitSeconds bounds the wait for the xtables lock.
const lockWaitSeconds = 120

// newKernelBackend builds the backend on the real runner inside ns.
func newKernelBackend(t testing.TB, cfg Config, mode, ns string) *Backend {
	t.Helper()
	// The xtables lock (/run/xtables.lock) is shared by every namespace:
	// wait for other users of the machine rather than fail.
	r, err := runner.New(runner.Options{Mode: mode, Netns: ns, WaitSeconds: lockWaitSeconds})
	if err != nil {
		t.Fatalf("runner.New(%s, %s): %v", mode, ns, err)
	}
	cfg.Runner = r
	b, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// canonicalRule rewrites a rule line so that what the render wrote and
// what iptables-save prints back compare equal when they mean the same:
// options are sorted within each match or target ("-m x ...", "-j X
// ..."), and the forms iptables normalises are rewritten (MARK
// --or-mark/--xor-mark, the digits of a probability, recent's default
// --mask and --rsource).
func canonicalRule(line string) string {
	var groups [][]string
	for _, tok := range splitQuoted(line) {
		if tok == "-m" || tok == "-j" || len(groups) == 0 {
			groups = append(groups, nil)
		}
		groups[len(groups)-1] = append(groups[len(groups)-1], tok)
	}
	out := make([]string, 0, len(groups))
	for _, g := range groups {
		head, opts := g[:2], canonicalOptions(g[2:])
		slices.Sort(opts)
		out = append(out, strings.Join(append(slices.Clone(head), opts...), " "))
	}
	return strings.Join(out, " ")
}

// canonicalOptions groups tokens into options ("[!] --flag values...")
// and rewrites the normalised forms.
func canonicalOptions(toks []string) []string {
	var opts [][]string
	for i, tok := range toks {
		startsOpt := tok == "!" || (strings.HasPrefix(tok, "-") && (i == 0 || toks[i-1] != "!"))
		if startsOpt || len(opts) == 0 {
			opts = append(opts, nil)
		}
		opts[len(opts)-1] = append(opts[len(opts)-1], tok)
	}
	var out []string
	for _, o := range opts {
		s := strings.Join(o, " ")
		switch {
		case len(o) == 2 && o[0] == "--or-mark":
			s = "--set-xmark " + o[1] + "/" + o[1]
		case len(o) == 2 && o[0] == "--xor-mark":
			s = "--set-xmark " + o[1] + "/0x0"
		case len(o) == 2 && o[0] == "--probability":
			p, _ := strconv.ParseFloat(o[1], 64)
			s = "--probability " + strconv.FormatFloat(p, 'f', 6, 64)
		case s == "--rsource", s == "--mask 255.255.255.255", s == "--mask ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff":
			continue
		}
		out = append(out, s)
	}
	return out
}

// splitQuoted splits on blanks, keeping a double-quoted part (quotes
// included) as one token. Rule comments hold no escaped quotes.
func splitQuoted(line string) []string {
	var out []string
	var cur strings.Builder
	inQuote := false
	for _, r := range line {
		switch {
		case r == '"':
			inQuote = !inQuote
			cur.WriteRune(r)
		case r == ' ' && !inQuote:
			if cur.Len() > 0 {
				out = append(out, cur.String())
				cur.Reset()
			}
		default:
			cur.WriteRune(r)
		}
	}
	if cur.Len() > 0 {
		out = append(out, cur.String())
	}
	return out
}
