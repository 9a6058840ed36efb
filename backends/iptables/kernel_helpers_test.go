package iptables

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/vishvananda/netns"

	"github.com/switchyard-proxy/switchyard/backends/iptables/runner"
)

// Helpers of the kernel tests: real iptables in network namespaces each
// test creates (named "syipt-<role>-<random>") and deletes when it ends,
// failed or not. Nothing here touches the host namespace.

// requireKernel skips the test unless it runs as root with
// SWITCHYARD_KERNEL_TESTS=1.
func requireKernel(t *testing.T) {
	t.Helper()
	if os.Getuid() != 0 || os.Getenv("SWITCHYARD_KERNEL_TESTS") != "1" {
		t.Skip("kernel test: needs root and SWITCHYARD_KERNEL_TESTS=1")
	}
}

// kernelModes are the iptables backends every kernel test runs against.
func kernelModes() []string { return []string{runner.ModeNFT, runner.ModeLegacy} }

// newTestNetns creates a network namespace deleted when the test ends.
func newTestNetns(t *testing.T, role string) string {
	t.Helper()
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	name := "syipt-" + role + "-" + hex.EncodeToString(b[:])
	mustRun(t, "ip", "netns", "add", name)
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v: %s", name, err, out)
		}
	})
	return name
}

// mustRun runs a command and fails the test if it fails.
func mustRun(t testing.TB, args ...string) string {
	t.Helper()
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// nsRun runs a command inside a namespace.
func nsRun(t testing.TB, ns string, args ...string) string {
	t.Helper()
	return mustRun(t, append([]string{"ip", "netns", "exec", ns}, args...)...)
}

// inNetns runs fn on a fresh OS thread switched into ns. The thread is
// never unlocked, so the runtime destroys it when fn returns and no other
// goroutine ever runs in ns. Sockets fn creates stay in ns and may be used
// from any goroutine afterwards.
func inNetns(ns string, fn func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		h, err := netns.GetFromName(ns)
		if err != nil {
			done <- fmt.Errorf("open netns %s: %w", ns, err)
			return
		}
		defer h.Close()
		if err := netns.Set(h); err != nil {
			done <- fmt.Errorf("enter netns %s: %w", ns, err)
			return
		}
		done <- fn()
	}()
	return <-done
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
