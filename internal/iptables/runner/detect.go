package runner

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"strconv"
	"time"
)

// detectTimeout bounds each command run while detecting the mode.
const detectTimeout = 30 * time.Second

// kubeletHintChains are the mangle chains kubelet (and kube-proxy) create
// in the backend the node really uses; iptables-wrappers trusts them first.
func kubeletHintChains() [][]byte {
	return [][]byte{[]byte("\n:KUBE-IPTABLES-HINT "), []byte("\n:KUBE-KUBELET-CANARY ")}
}

// detectMode picks nf_tables or legacy. A forced mode wins. With both
// iptables-nft-save and iptables-legacy-save installed it decides like
// kubernetes-sigs/iptables-wrappers: a backend holding kubelet's hint
// chains wins, else the one with more rules (nf_tables on a tie). Otherwise
// `iptables --version` says "(nf_tables)" or "(legacy)" (no suffix: an
// old, legacy-only iptables).
func detectMode(x Exec, forced string) (string, error) {
	if forced != "" {
		return forced, nil
	}
	if installed(x, "iptables-nft-save") && installed(x, "iptables-legacy-save") {
		return modeFromRules(x), nil
	}
	out, _, err := run(x, Command{Name: "iptables", Args: []string{"--version"}})
	if err != nil {
		return "", fmt.Errorf("iptables --version: %w", err)
	}
	_, mode, err := parseVersion(out)
	return mode, err
}

func modeFromRules(x Exec) string {
	if hasHintChains(x, "nft") {
		return ModeNFT
	}
	if hasHintChains(x, "legacy") {
		return ModeLegacy
	}
	if countRules(x, "legacy") > countRules(x, "nft") {
		return ModeLegacy
	}
	return ModeNFT
}

// hasHintChains looks for kubelet's hint chains. It saves every table
// rather than asking for mangle: `iptables-legacy-save -t mangle` would
// create the legacy mangle table as a side effect, and iptables-nft then
// warns operators that legacy tables are present.
func hasHintChains(x Exec, variant string) bool {
	for _, bin := range []string{"iptables-" + variant + "-save", "ip6tables-" + variant + "-save"} {
		out, _, _ := run(x, Command{Name: bin})
		out = append([]byte("\n"), out...)
		for _, hint := range kubeletHintChains() {
			if bytes.Contains(out, hint) {
				return true
			}
		}
	}
	return false
}

// countRules counts "-A" lines of both families; save errors count zero.
func countRules(x Exec, variant string) int {
	n := 0
	for _, bin := range []string{"iptables-" + variant + "-save", "ip6tables-" + variant + "-save"} {
		out, _, _ := run(x, Command{Name: bin})
		n += bytes.Count(append([]byte("\n"), out...), []byte("\n-"))
	}
	return n
}

func installed(x Exec, name string) bool {
	_, err := x.LookPath(name)
	return err == nil
}

func run(x Exec, cmd Command) ([]byte, []byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), detectTimeout)
	defer cancel()
	return x.Run(ctx, cmd)
}

var versionRE = regexp.MustCompile(`v([0-9]+)\.([0-9]+)\.([0-9]+)(?:\s+\((\w+)\))?`)

// version is an iptables release, comparable as a number.
type version [3]int

func (v version) atLeast(o version) bool {
	for i := range v {
		if v[i] != o[i] {
			return v[i] > o[i]
		}
	}
	return true
}

// parseVersion reads `iptables --version`: "iptables v1.8.9 (nf_tables)".
func parseVersion(out []byte) (version, string, error) {
	m := versionRE.FindSubmatch(out)
	if m == nil {
		return version{}, "", fmt.Errorf("no iptables version in %q", bytes.TrimSpace(out))
	}
	var v version
	for i := range v {
		v[i], _ = strconv.Atoi(string(m[i+1]))
	}
	switch string(m[4]) {
	case "", ModeLegacy:
		return v, ModeLegacy, nil
	case ModeNFT:
		return v, ModeNFT, nil
	}
	return v, "", fmt.Errorf("unknown iptables mode %q", m[4])
}
