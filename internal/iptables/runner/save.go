package runner

import "strings"

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
