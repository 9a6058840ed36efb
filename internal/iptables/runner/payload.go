package runner

import "strings"

// TableChain names one chain of one table.
type TableChain struct{ Table, Chain string }

// PayloadRuleCounts counts the rules ("-A CHAIN ...") each chain gets in a
// restore payload, so a mode can compare what it wrote with what the
// kernel holds (CountChainRules, ListChain) without keeping the rules.
func PayloadRuleCounts(payload []byte) map[TableChain]int {
	counts := map[TableChain]int{}
	table := ""
	for _, line := range strings.Split(string(payload), "\n") {
		switch {
		case strings.HasPrefix(line, "*"):
			table = line[1:]
		case strings.HasPrefix(line, "-A "):
			chain, _, _ := strings.Cut(line[len("-A "):], " ")
			counts[TableChain{table, chain}]++
		}
	}
	return counts
}
