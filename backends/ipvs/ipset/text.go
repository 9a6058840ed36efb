package ipset

import (
	"bufio"
	"bytes"
	"fmt"
	"strconv"
	"strings"
)

// Command is one line of `ipset restore` input.
type Command struct {
	// Op is create, add, del, flush, destroy or swap.
	Op string
	// Set is the set the command works on ("" for flush/destroy of all).
	Set string
	// Args are the remaining arguments: the type and options of create,
	// the entry of add/del, the second set of swap.
	Args []string
	// Exist is the -exist flag: no error for an existing set or entry on
	// create/add, or a missing entry on del.
	Exist bool
	// Line is the 1-based line number in the input.
	Line int
}

// String writes the command back as a restore line.
func (c Command) String() string {
	parts := append([]string{c.Op}, c.Set)
	parts = append(parts, c.Args...)
	if c.Exist {
		parts = append(parts, "-exist")
	}
	return strings.Join(strings.Fields(strings.Join(parts, " ")), " ")
}

// ParseCommands splits restore input into commands. Blank lines and
// "#" comments are skipped; a trailing COMMIT (which ipset accepts) too.
func ParseCommands(data []byte) ([]Command, error) {
	var cmds []Command
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for n := 1; sc.Scan(); n++ {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 || strings.HasPrefix(fields[0], "#") || fields[0] == "COMMIT" {
			continue
		}
		c := Command{Op: fields[0], Line: n}
		for _, f := range fields[1:] {
			switch {
			case f == "-exist" || f == "-!":
				c.Exist = true
			case c.Set == "":
				c.Set = f
			default:
				c.Args = append(c.Args, f)
			}
		}
		if err := c.check(); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		cmds = append(cmds, c)
	}
	return cmds, sc.Err()
}

func (c Command) check() error {
	switch c.Op {
	case "create":
		if c.Set == "" || len(c.Args) == 0 {
			return fmt.Errorf("create needs a set name and a type")
		}
	case "add", "del":
		if c.Set == "" || len(c.Args) != 1 {
			return fmt.Errorf("%s needs a set name and one entry", c.Op)
		}
	case "swap":
		if c.Set == "" || len(c.Args) != 1 {
			return fmt.Errorf("swap needs two set names")
		}
	case "flush", "destroy":
		if len(c.Args) != 0 {
			return fmt.Errorf("%s takes at most a set name", c.Op)
		}
	default:
		return fmt.Errorf("unknown command %q", c.Op)
	}
	if len(c.Set) > MaxNameLength {
		return fmt.Errorf("set name %q longer than %d", c.Set, MaxNameLength)
	}
	return nil
}

// MaxNameLength is the longest set name the kernel accepts.
const MaxNameLength = 31

// Set is one set as `ipset save` describes it.
type Set struct {
	Name string
	Type string
	// Family is "inet" or "inet6" for hash types, "" for bitmap:port.
	Family string
	// Options are the create options as written after the type.
	Options []string
	// Entries are the members in canonical form.
	Entries map[string]struct{}
}

// FamilyOption returns the value of the "family" option ("" if none).
func FamilyOption(opts []string) string {
	for i := 0; i+1 < len(opts); i++ {
		if opts[i] == "family" {
			return opts[i+1]
		}
	}
	return ""
}

// ParseSave reads `ipset save` output into sets by name. Entries are
// canonicalised for the set's type.
func ParseSave(data []byte) (map[string]*Set, error) {
	cmds, err := ParseCommands(data)
	if err != nil {
		return nil, err
	}
	sets := map[string]*Set{}
	for _, c := range cmds {
		switch c.Op {
		case "create":
			sets[c.Set] = &Set{Name: c.Set, Type: c.Args[0], Family: FamilyOption(c.Args[1:]),
				Options: c.Args[1:], Entries: map[string]struct{}{}}
		case "add":
			s, ok := sets[c.Set]
			if !ok {
				return nil, fmt.Errorf("line %d: add to undeclared set %q", c.Line, c.Set)
			}
			if err := s.addSaved(c.Args[0]); err != nil {
				return nil, fmt.Errorf("line %d: %w", c.Line, err)
			}
		default:
			return nil, fmt.Errorf("line %d: unexpected %q in save output", c.Line, c.Op)
		}
	}
	return sets, nil
}

// addSaved adds a saved entry; entries of types this package does not
// know are kept as written (they belong to other programs' sets).
func (s *Set) addSaved(entry string) error {
	if !KnownType(s.Type) {
		s.Entries[entry] = struct{}{}
		return nil
	}
	canon, err := Canonical(s.Type, entry)
	if err != nil {
		return fmt.Errorf("set %s: %w", s.Name, err)
	}
	s.Entries[canon] = struct{}{}
	return nil
}

// KnownType reports whether the package can parse entries of the type.
func KnownType(t string) bool {
	switch t {
	case HashIP, HashIPPort, HashIPPortIP, HashIPPortNet, HashNet, BitmapPort:
		return true
	}
	return false
}

// ParseTerse reads `ipset list -terse` output into each set's member
// count ("Number of entries:" of its header; -1 when the header has none,
// as from kernels that do not report it).
func ParseTerse(data []byte) (map[string]int, error) {
	counts := map[string]int{}
	name := ""
	for _, line := range strings.Split(string(data), "\n") {
		key, value, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		value = strings.TrimSpace(value)
		switch key {
		case "Name":
			name = value
			counts[name] = -1
		case "Number of entries":
			if name == "" {
				return nil, fmt.Errorf("ipset list: %q before any set name", line)
			}
			n, err := strconv.Atoi(value)
			if err != nil {
				return nil, fmt.Errorf("ipset list: set %s: %w", name, err)
			}
			counts[name] = n
		}
	}
	return counts, nil
}
