package runner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
)

// reply is what the scripted exec answers to one command line.
type reply struct {
	stdout, stderr string
	err            error
}

// scriptedExec answers known command lines and fails the test loudly on
// any other. It records every command it ran, stdin included.
type scriptedExec struct {
	t         *testing.T
	installed map[string]bool
	replies   map[string]reply // key: name and args joined by spaces

	mu    sync.Mutex
	calls []Command
}

func newScriptedExec(t *testing.T, installed ...string) *scriptedExec {
	x := &scriptedExec{t: t, installed: map[string]bool{}, replies: map[string]reply{}}
	for _, name := range installed {
		x.installed[name] = true
	}
	return x
}

func (x *scriptedExec) on(cmdline string, r reply) *scriptedExec {
	x.replies[cmdline] = r
	return x
}

func (x *scriptedExec) Run(_ context.Context, cmd Command) ([]byte, []byte, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if cmd.StdinFrom != nil {
		// Recorded as the bytes a program would have read.
		var in bytes.Buffer
		if _, err := cmd.StdinFrom.WriteTo(&in); err != nil {
			return nil, nil, err
		}
		cmd.Stdin, cmd.StdinFrom = in.Bytes(), nil
	}
	x.calls = append(x.calls, cmd)
	key := strings.Join(append([]string{cmd.Name}, cmd.Args...), " ")
	r, ok := x.replies[key]
	if !ok {
		x.t.Errorf("unexpected command %q", key)
		return nil, nil, fmt.Errorf("unexpected command %q", key)
	}
	return []byte(r.stdout), []byte(r.stderr), r.err
}

func (x *scriptedExec) LookPath(name string) (string, error) {
	if x.installed[name] {
		return "/usr/sbin/" + name, nil
	}
	return "", exec.ErrNotFound
}

func (x *scriptedExec) ran() []Command {
	x.mu.Lock()
	defer x.mu.Unlock()
	return append([]Command(nil), x.calls...)
}

// opsCall records one go-iptables call made by the runner.
type opsCall struct {
	Fam    Family
	Op     string
	Table  string
	Chain  string
	Pos    int
	Args   []string
	Binary string
}

// fakeOps is a tiny stateful stand-in for go-iptables: chains with rule
// strings, "not found" errors like iptables' exit status 1.
type fakeOps struct {
	fam    Family
	binary string
	log    *[]opsCall
	chains map[string][]string // "table/chain" -> rules
}

var errNoChain = errors.New("iptables: No chain/target/match by that name")

func (f *fakeOps) record(op, table, chain string, pos int, args []string) {
	*f.log = append(*f.log, opsCall{f.fam, op, table, chain, pos, args, f.binary})
}

func (f *fakeOps) Exists(table, chain string, rule ...string) (bool, error) {
	f.record("Exists", table, chain, 0, rule)
	rules, ok := f.chains[table+"/"+chain]
	if !ok {
		return false, errNoChain
	}
	for _, r := range rules {
		if r == strings.Join(rule, " ") {
			return true, nil
		}
	}
	return false, nil
}

func (f *fakeOps) Insert(table, chain string, pos int, rule ...string) error {
	f.record("Insert", table, chain, pos, rule)
	k := table + "/" + chain
	f.chains[k] = append([]string{strings.Join(rule, " ")}, f.chains[k]...)
	return nil
}

func (f *fakeOps) Append(table, chain string, rule ...string) error {
	f.record("Append", table, chain, 0, rule)
	k := table + "/" + chain
	f.chains[k] = append(f.chains[k], strings.Join(rule, " "))
	return nil
}

func (f *fakeOps) Delete(table, chain string, rule ...string) error {
	f.record("Delete", table, chain, 0, rule)
	k := table + "/" + chain
	for i, r := range f.chains[k] {
		if r == strings.Join(rule, " ") {
			f.chains[k] = append(f.chains[k][:i:i], f.chains[k][i+1:]...)
			return nil
		}
	}
	return errors.New("iptables: Bad rule (does a matching rule exist in that chain?)")
}

func (f *fakeOps) ChainExists(table, chain string) (bool, error) {
	f.record("ChainExists", table, chain, 0, nil)
	_, ok := f.chains[table+"/"+chain]
	return ok, nil
}

func (f *fakeOps) NewChain(table, chain string) error {
	f.record("NewChain", table, chain, 0, nil)
	if _, ok := f.chains[table+"/"+chain]; ok {
		return errors.New("iptables: Chain already exists")
	}
	f.chains[table+"/"+chain] = []string{}
	return nil
}

func (f *fakeOps) ClearChain(table, chain string) error {
	f.record("ClearChain", table, chain, 0, nil)
	f.chains[table+"/"+chain] = []string{}
	return nil
}

func (f *fakeOps) DeleteChain(table, chain string) error {
	f.record("DeleteChain", table, chain, 0, nil)
	rules, ok := f.chains[table+"/"+chain]
	switch {
	case !ok:
		return errNoChain
	case len(rules) > 0:
		return errors.New("iptables: Directory not empty")
	}
	delete(f.chains, table+"/"+chain)
	return nil
}

// fakeOpsFactory returns an opsFactory whose handles share one call log.
func fakeOpsFactory(log *[]opsCall) (opsFactory, map[Family]*fakeOps) {
	made := map[Family]*fakeOps{}
	return func(fam Family, binary string, _ int) (ruleOps, error) {
		o := &fakeOps{fam: fam, binary: binary, log: log, chains: map[string][]string{}}
		made[fam] = o
		return o, nil
	}, made
}
