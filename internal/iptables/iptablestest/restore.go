package iptablestest

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
)

// ErrRejected is the Err of a *runner.RestoreError for a payload the fake
// rejected; the RestoreError's Lines and Stderr say where and why.
var ErrRejected = errors.New("iptablestest: restore rejected")

// restoreLocked applies an iptables-restore payload, table section by
// table section.
func (f *Fake) restoreLocked(fam runner.Family, data []byte) error {
	lines := strings.Split(string(data), "\n")
	var cur *txn
	for i, raw := range lines {
		n := i + 1
		line := strings.TrimSpace(raw)
		if line == "" || line[0] == '#' {
			continue
		}
		var err error
		switch {
		case line[0] == '*':
			cur, err = f.beginTable(fam, cur, line[1:])
		case line == "COMMIT":
			err = f.commit(fam, cur)
			cur = nil
		case cur == nil:
			err = fmt.Errorf("%q outside a table section", line)
		case line[0] == ':':
			err = declareLine(cur, line)
		default:
			err = commandLine(cur, line)
		}
		if err != nil {
			return rejected(n, err)
		}
	}
	if cur != nil {
		return rejected(len(lines), fmt.Errorf("COMMIT expected"))
	}
	return nil
}

func rejected(line int, err error) error {
	return &runner.RestoreError{
		Lines:  []int{line},
		Stderr: fmt.Sprintf("iptablestest: line %d: %v\n", line, err),
		Err:    ErrRejected,
	}
}

func (f *Fake) beginTable(fam runner.Family, cur *txn, name string) (*txn, error) {
	if cur != nil {
		return nil, fmt.Errorf("table %s not committed before *%s", cur.t.name, name)
	}
	base, ok := f.tables[fam][name]
	if !ok {
		return nil, fmt.Errorf("unknown table %q", name)
	}
	return newTxn(fam, base), nil
}

func (f *Fake) commit(fam runner.Family, x *txn) error {
	if x == nil {
		return fmt.Errorf("COMMIT outside a table section")
	}
	if err := x.check(); err != nil {
		return err
	}
	f.tables[fam][x.t.name] = x.t
	return nil
}

// declareLine handles ":NAME POLICY [packets:bytes]".
func declareLine(x *txn, line string) error {
	fields := strings.Fields(line[1:])
	if len(fields) < 2 || len(fields) > 3 {
		return fmt.Errorf("bad chain declaration %q", line)
	}
	return x.declare(fields[0], fields[1])
}

// commandLine handles one iptables command of a table section.
func commandLine(x *txn, line string) error {
	args, err := splitLine(line)
	if err != nil {
		return err
	}
	if strings.HasPrefix(args[0], "[") { // "[packets:bytes] -A ..." (iptables-save -c)
		args = args[1:]
	}
	if len(args) == 0 {
		return fmt.Errorf("empty command")
	}
	cmd, rest := longCommand(args[0]), args[1:]
	if cmd == "-F" || cmd == "-X" || cmd == "-Z" || cmd == "-S" {
		return chainsCommand(x, cmd, rest)
	}
	if len(rest) == 0 {
		return fmt.Errorf("%s needs a chain", args[0])
	}
	chainName, rest := rest[0], rest[1:]
	switch cmd {
	case "-A":
		_, err = x.insert(chainName, -1, rest)
	case "-I":
		err = insertCommand(x, chainName, rest)
	case "-D":
		err = x.deleteRule(chainName, rest)
	case "-N":
		err = noArgs(cmd, rest, func() error { return x.newChain(chainName) })
	case "-P":
		if len(rest) != 1 {
			return fmt.Errorf("-P needs a chain and a policy")
		}
		err = x.setPolicy(chainName, rest[0])
	default:
		err = fmt.Errorf("unsupported command %q", args[0])
	}
	return err
}

func chainsCommand(x *txn, cmd string, rest []string) error {
	if len(rest) > 1 {
		return fmt.Errorf("%s takes at most a chain", cmd)
	}
	name := ""
	if len(rest) == 1 {
		name = rest[0]
	}
	switch cmd {
	case "-F":
		return x.flush(name)
	case "-X":
		return x.deleteChain(name)
	}
	// -Z and -S (list rules, which iptables-nft-restore prints): the
	// fake keeps no counters and prints nothing.
	if _, ok := x.t.chains[name]; name != "" && !ok {
		return fmt.Errorf("chain %q does not exist in table %s", name, x.t.name)
	}
	return nil
}

func insertCommand(x *txn, chainName string, rest []string) error {
	pos := 0
	if len(rest) > 0 {
		if n, err := strconv.Atoi(rest[0]); err == nil {
			if n < 1 {
				return fmt.Errorf("bad rule number %d", n)
			}
			pos, rest = n-1, rest[1:]
		}
	}
	_, err := x.insert(chainName, pos, rest)
	return err
}

func noArgs(cmd string, rest []string, fn func() error) error {
	if len(rest) != 0 {
		return fmt.Errorf("%s takes only a chain", cmd)
	}
	return fn()
}

func longCommand(c string) string {
	switch c {
	case "--append":
		return "-A"
	case "--insert":
		return "-I"
	case "--delete":
		return "-D"
	case "--flush":
		return "-F"
	case "--list-rules":
		return "-S"
	case "--delete-chain":
		return "-X"
	case "--new-chain", "--new":
		return "-N"
	case "--policy":
		return "-P"
	case "--zero":
		return "-Z"
	}
	return c
}
