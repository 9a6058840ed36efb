package iptablestest

import (
	"fmt"
	"strings"
)

// Value is an argument that may be negated with "!".
type Value struct {
	Value   string
	Negated bool
}

// Option is one "--name values..." of a match or a target. Name uses the
// short spelling ("--dport" for "--destination-port").
type Option struct {
	Name    string
	Values  []string
	Negated bool
}

// Match is one match module ("-m tcp" or the protocol's implicit one).
type Match struct {
	Module  string
	Options []Option
}

// Option returns the match's first option with this name.
func (m Match) Option(name string) (Option, bool) { return findOption(m.Options, name) }

// Rule is one parsed rule.
type Rule struct {
	Chain string
	// Args are the rule's arguments after "-A CHAIN", as written.
	Args []string

	Protocol     *Value
	Source       *Value
	Destination  *Value
	InInterface  *Value
	OutInterface *Value
	Matches      []Match
	// Jump is the -j target or -g chain ("" for none); Goto marks -g.
	Jump          string
	Goto          bool
	TargetOptions []Option
	// Comment is the first -m comment --comment.
	Comment string
}

// String is the rule as iptables-save prints it: "-A CHAIN args".
func (r *Rule) String() string {
	if len(r.Args) == 0 {
		return "-A " + r.Chain
	}
	return "-A " + r.Chain + " " + joinArgs(r.Args)
}

// Match returns the rule's first match of the module.
func (r *Rule) Match(module string) (Match, bool) {
	for _, m := range r.Matches {
		if m.Module == module {
			return m, true
		}
	}
	return Match{}, false
}

// TargetOption returns the target's option with this name.
func (r *Rule) TargetOption(name string) (Option, bool) { return findOption(r.TargetOptions, name) }

func findOption(opts []Option, name string) (Option, bool) {
	for _, o := range opts {
		if o.Name == name {
			return o, true
		}
	}
	return Option{}, false
}

// ruleParser holds the state of parsing one rule's arguments.
type ruleParser struct {
	r       *Rule
	args    []string
	i       int
	negate  bool
	inMatch int  // index in r.Matches options go to, -1 for none
	inJump  bool // options go to the target
}

// parseRule parses the arguments of a rule of chain and returns it with
// its identity key (see ruleKey).
func parseRule(chainName string, args []string) (*Rule, string, error) {
	p := &ruleParser{r: &Rule{Chain: chainName, Args: append([]string(nil), args...)}, args: args, inMatch: -1}
	for p.i < len(p.args) {
		if err := p.step(); err != nil {
			return nil, "", err
		}
	}
	if p.negate {
		return nil, "", fmt.Errorf("\"!\" at the end of the rule")
	}
	return p.r, ruleKey(p.r), nil
}

// shortOpt maps long spellings of the generic options to short ones.
func shortOpt(tok string) string {
	switch tok {
	case "--protocol":
		return "-p"
	case "--source", "--src":
		return "-s"
	case "--destination", "--dst":
		return "-d"
	case "--in-interface":
		return "-i"
	case "--out-interface":
		return "-o"
	case "--jump":
		return "-j"
	case "--goto":
		return "-g"
	case "--match":
		return "-m"
	}
	return tok
}

func (p *ruleParser) step() error {
	tok := shortOpt(p.args[p.i])
	p.i++
	switch tok {
	case "!":
		if p.negate || p.i >= len(p.args) || !strings.HasPrefix(p.args[p.i], "-") {
			return fmt.Errorf("misplaced \"!\"")
		}
		p.negate = true
		return nil
	case "-p", "-s", "-d", "-i", "-o":
		return p.generic(tok)
	case "-m":
		return p.match()
	case "-j", "-g":
		return p.jump(tok == "-g")
	}
	if strings.HasPrefix(tok, "--") {
		return p.option(tok)
	}
	return fmt.Errorf("unexpected argument %q", tok)
}

func (p *ruleParser) value(opt string) (string, error) {
	if p.i >= len(p.args) {
		return "", fmt.Errorf("option %s needs a value", opt)
	}
	p.i++
	return p.args[p.i-1], nil
}

func (p *ruleParser) generic(opt string) error {
	v, err := p.value(opt)
	if err != nil {
		return err
	}
	val := &Value{Value: v, Negated: p.negate}
	p.negate = false
	slot := map[string]**Value{"-p": &p.r.Protocol, "-s": &p.r.Source, "-d": &p.r.Destination,
		"-i": &p.r.InInterface, "-o": &p.r.OutInterface}[opt]
	if *slot != nil {
		return fmt.Errorf("multiple %s options", opt)
	}
	if opt == "-p" {
		val.Value = strings.ToLower(val.Value)
	}
	*slot = val
	return nil
}

func (p *ruleParser) match() error {
	if p.negate {
		return fmt.Errorf("\"!\" before -m")
	}
	m, err := p.value("-m")
	if err != nil {
		return err
	}
	p.r.Matches = append(p.r.Matches, Match{Module: m})
	p.inMatch, p.inJump = len(p.r.Matches)-1, false
	return nil
}

func (p *ruleParser) jump(isGoto bool) error {
	if p.negate {
		return fmt.Errorf("\"!\" before a target")
	}
	if p.r.Jump != "" {
		return fmt.Errorf("more than one target")
	}
	t, err := p.value("-j")
	if err != nil {
		return err
	}
	p.r.Jump, p.r.Goto, p.inJump = t, isGoto, true
	return nil
}

// option reads "--name [values...]": the values are the following
// arguments up to the next one that starts with "-" or is "!".
func (p *ruleParser) option(name string) error {
	name = canonicalOption(name)
	opt := Option{Name: name, Negated: p.negate}
	p.negate = false
	for p.i < len(p.args) {
		a := p.args[p.i]
		if a == "!" || (len(a) > 1 && a[0] == '-' && !isNumber(a)) {
			break
		}
		opt.Values = append(opt.Values, a)
		p.i++
		if name == "--comment" {
			break
		}
	}
	return p.attach(opt)
}

// attach gives an option to the target or match it follows, falling back
// to the protocol's implicit match ("-p tcp --dport 80").
func (p *ruleParser) attach(opt Option) error {
	if p.inJump && targetTakes(p.r.Jump, opt.Name) {
		p.r.TargetOptions = append(p.r.TargetOptions, opt)
		return nil
	}
	if p.inMatch >= 0 && moduleTakes(p.r.Matches[p.inMatch].Module, opt.Name) {
		m := &p.r.Matches[p.inMatch]
		m.Options = append(m.Options, opt)
		if opt.Name == "--comment" && p.r.Comment == "" && len(opt.Values) == 1 {
			p.r.Comment = opt.Values[0]
		}
		return nil
	}
	if p.r.Protocol != nil && moduleTakes(p.r.Protocol.Value, opt.Name) && knownModule(p.r.Protocol.Value) {
		proto := p.r.Protocol.Value
		for i := range p.r.Matches {
			if p.r.Matches[i].Module == proto {
				p.r.Matches[i].Options = append(p.r.Matches[i].Options, opt)
				return nil
			}
		}
		p.r.Matches = append(p.r.Matches, Match{Module: proto, Options: []Option{opt}})
		return nil
	}
	return fmt.Errorf("unknown option %q", opt.Name)
}

func isNumber(s string) bool {
	for i, c := range s {
		if !(c >= '0' && c <= '9') && !(i == 0 && c == '-') {
			return false
		}
	}
	return true
}

// ruleKey is a rule's identity as iptables compares rules for -D and -C,
// for the spellings renderers use.
func ruleKey(r *Rule) string {
	var b strings.Builder
	val := func(name string, v *Value, norm func(string) string) {
		if v == nil {
			return
		}
		if v.Negated {
			b.WriteString("! ")
		}
		fmt.Fprintf(&b, "%s %s ", name, norm(v.Value))
	}
	same := func(s string) string { return s }
	val("-p", r.Protocol, protocolName)
	val("-s", r.Source, normalizeAddr)
	val("-d", r.Destination, normalizeAddr)
	val("-i", r.InInterface, same)
	val("-o", r.OutInterface, same)
	for _, m := range r.Matches {
		fmt.Fprintf(&b, "-m %s ", m.Module)
		writeOptions(&b, m.Options)
	}
	if r.Jump != "" {
		fmt.Fprintf(&b, "-j %s %v ", r.Jump, r.Goto)
		writeOptions(&b, r.TargetOptions)
	}
	return b.String()
}

func writeOptions(b *strings.Builder, opts []Option) {
	for _, o := range opts {
		if o.Negated {
			b.WriteString("! ")
		}
		fmt.Fprintf(b, "%s %q ", o.Name, o.Values)
	}
}

// clone deep-copies a rule so callers cannot change the fake's state.
func (r *Rule) clone() Rule {
	n := *r
	n.Args = append([]string(nil), r.Args...)
	for _, v := range []**Value{&n.Protocol, &n.Source, &n.Destination, &n.InInterface, &n.OutInterface} {
		if *v != nil {
			c := **v
			*v = &c
		}
	}
	n.Matches = make([]Match, len(r.Matches))
	for i, m := range r.Matches {
		n.Matches[i] = Match{Module: m.Module, Options: cloneOptions(m.Options)}
	}
	n.TargetOptions = cloneOptions(r.TargetOptions)
	return n
}

func cloneOptions(opts []Option) []Option {
	if opts == nil {
		return nil
	}
	out := make([]Option, len(opts))
	for i, o := range opts {
		out[i] = Option{Name: o.Name, Values: append([]string(nil), o.Values...), Negated: o.Negated}
	}
	return out
}
