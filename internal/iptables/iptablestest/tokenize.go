package iptablestest

import (
	"fmt"
	"strings"
)

// splitLine splits one iptables-restore line into arguments the way
// iptables-restore does: blanks separate arguments; a double quote opens a
// quoted part in which blanks are kept and a backslash escapes the next
// character; the closing quote ends the argument.
func splitLine(line string) ([]string, error) {
	var args []string
	var cur strings.Builder
	inQuote, escaped, have := false, false, false
	for _, r := range line {
		switch {
		case inQuote && escaped:
			cur.WriteRune(r)
			escaped = false
		case inQuote && r == '\\':
			escaped = true
		case inQuote && r == '"':
			inQuote = false
			args = append(args, cur.String())
			cur.Reset()
			have = false
		case inQuote:
			cur.WriteRune(r)
		case r == '"':
			inQuote, have = true, true
		case r == ' ' || r == '\t' || r == '\r':
			if have {
				args = append(args, cur.String())
				cur.Reset()
				have = false
			}
		default:
			cur.WriteRune(r)
			have = true
		}
	}
	if inQuote {
		return nil, fmt.Errorf("unterminated quoted argument")
	}
	if have {
		args = append(args, cur.String())
	}
	return args, nil
}

// quoteArg formats one argument as iptables-save does: quoted (with " and
// \ escaped) when it is empty or holds blanks, quotes or backslashes.
func quoteArg(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\"'\\") {
		return s
	}
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`)
	return `"` + r.Replace(s) + `"`
}

// joinArgs quotes and joins arguments into one line.
func joinArgs(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = quoteArg(a)
	}
	return strings.Join(q, " ")
}
