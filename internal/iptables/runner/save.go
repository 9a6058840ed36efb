package runner

import (
	"bytes"
	"strings"
)

// Saved is one table of iptables-save output, parsed.
type Saved struct {
	Chains []string    // every chain declared, built-in ones included
	Rules  []SavedRule // every rule, in order
}

// SavedRule is one "-A CHAIN spec" line.
type SavedRule struct {
	Chain  string
	Spec   string // everything after the chain name, as saved
	Target string // the chain or target after the last -j or -g; "" if none
}

// DeleteLine is the restore line that deletes the rule.
func (r SavedRule) DeleteLine() string { return "-D " + r.Chain + " " + r.Spec }

// ParseSave parses the output of `iptables-save -t TABLE`.
func ParseSave(data []byte) Saved {
	var s Saved
	for _, line := range strings.Split(string(data), "\n") {
		switch {
		case strings.HasPrefix(line, ":"):
			if name, _, ok := strings.Cut(line[1:], " "); ok {
				s.Chains = append(s.Chains, name)
			}
		case strings.HasPrefix(line, "-A "):
			chain, spec, _ := strings.Cut(line[3:], " ")
			s.Rules = append(s.Rules, SavedRule{Chain: chain, Spec: spec, Target: lastJump(spec)})
		}
	}
	return s
}

// lastJump is the word after the last -j or -g of a saved rule.
func lastJump(spec string) string {
	f := strings.Fields(spec)
	for i := len(f) - 2; i >= 0; i-- {
		if f[i] == "-j" || f[i] == "-g" {
			return f[i+1]
		}
	}
	return ""
}

// SavedChains lists the chains iptables-save output declares, without
// parsing its rules: at 10k services x 10 endpoints nat holds ~320k rules
// (~40 MB), which ParseSave copies and splits into fields for ~130k
// chain names.
func SavedChains(data []byte) []string {
	var out []string
	for line := range bytes.Lines(data) {
		if name, _, ok := bytes.Cut(line, []byte(" ")); ok && len(name) > 1 && name[0] == ':' {
			out = append(out, string(name[1:]))
		}
	}
	return out
}

// SavedRulesFunc parses the rules of iptables-save output that keep
// selects by chain and target (as SavedRule.Target), copying only those.
func SavedRulesFunc(data []byte, keep func(chain, target []byte) bool) []SavedRule {
	var out []SavedRule
	for line := range bytes.Lines(data) {
		rest, ok := bytes.CutPrefix(bytes.TrimSuffix(line, []byte("\n")), []byte("-A "))
		if !ok {
			continue
		}
		chain, spec, _ := bytes.Cut(rest, []byte(" "))
		target := lastJumpBytes(spec)
		if keep(chain, target) {
			out = append(out, SavedRule{Chain: string(chain), Spec: string(spec), Target: string(target)})
		}
	}
	return out
}

// lastJumpBytes is lastJump without splitting the rule into fields.
func lastJumpBytes(spec []byte) []byte {
	var next []byte // the field after the one being looked at
	for len(spec) > 0 {
		spec = bytes.TrimRight(spec, " \t")
		i := bytes.LastIndexAny(spec, " \t")
		field := spec[i+1:]
		if (bytes.Equal(field, []byte("-j")) || bytes.Equal(field, []byte("-g"))) && next != nil {
			return next
		}
		next, spec = field, spec[:max(i, 0)]
		if i < 0 {
			break
		}
	}
	return nil
}
