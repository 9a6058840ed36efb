package ipvstest

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/switchyard-proxy/switchyard/backends/ipvs/ipset"
)

// FakeIPSet is a strict, stateful ipset.Interface. Safe for concurrent
// use.
type FakeIPSet struct {
	mu       sync.Mutex
	sets     map[string]*ipset.Set
	inUse    func(name string) bool
	restores []string
	failNext error
}

var _ ipset.Interface = (*FakeIPSet)(nil)

// NewFakeIPSet returns a kernel with no sets.
func NewFakeIPSet() *FakeIPSet {
	return &FakeIPSet{sets: map[string]*ipset.Set{}}
}

// SetInUse installs the check destroy makes: the kernel refuses to
// destroy a set an iptables rule references.
func (f *FakeIPSet) SetInUse(inUse func(name string) bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.inUse = inUse
}

// FailNextRestore makes the next Restore fail without changing anything.
func (f *FakeIPSet) FailNextRestore(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failNext = err
}

// Restores returns every Restore input so far.
func (f *FakeIPSet) Restores() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.restores)
}

// Names returns the sets, sorted.
func (f *FakeIPSet) Names() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Sorted(maps.Keys(f.sets))
}

// Entries returns a set's members in canonical form, sorted (nil for a
// missing set).
func (f *FakeIPSet) Entries(name string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.sets[name]
	if !ok {
		return nil
	}
	return slices.Sorted(maps.Keys(s.Entries))
}

// Set returns a copy of one set.
func (f *FakeIPSet) Set(name string) (ipset.Set, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.sets[name]
	if !ok {
		return ipset.Set{}, false
	}
	c := *s
	c.Entries = maps.Clone(s.Entries)
	return c, true
}

// Save implements ipset.Interface, like `ipset save`, sorted.
func (f *FakeIPSet) Save(ctx context.Context) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(f.sets)) {
		s := f.sets[name]
		b.WriteString(strings.Join(append([]string{"create", name, s.Type}, s.Options...), " ") + "\n")
		for _, e := range slices.Sorted(maps.Keys(s.Entries)) {
			b.WriteString("add " + name + " " + e + "\n")
		}
	}
	return []byte(b.String()), nil
}

// Counts implements ipset.Interface, like `ipset list -terse`.
func (f *FakeIPSet) Counts(ctx context.Context) (map[string]int, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string]int, len(f.sets))
	for name, s := range f.sets {
		out[name] = len(s.Entries)
	}
	return out, nil
}

// Restore implements ipset.Interface: commands apply one by one; the
// first failing one stops the restore, earlier ones stay (like ipset).
func (f *FakeIPSet) Restore(ctx context.Context, data []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.restores = append(f.restores, string(data))
	if err := f.failNext; err != nil {
		f.failNext = nil
		return err
	}
	cmds, err := ipset.ParseCommands(data)
	if err != nil {
		return fmt.Errorf("ipset v7.17: %w", err)
	}
	for _, c := range cmds {
		if err := f.apply(c); err != nil {
			return fmt.Errorf("ipset v7.17: Error in line %d: %w", c.Line, err)
		}
	}
	return nil
}

func (f *FakeIPSet) apply(c ipset.Command) error {
	switch c.Op {
	case "create":
		return f.create(c)
	case "add", "del":
		return f.addDel(c)
	case "flush":
		return f.each(c.Set, func(s *ipset.Set) error { s.Entries = map[string]struct{}{}; return nil })
	case "destroy":
		return f.destroy(c.Set)
	case "swap":
		a, b := f.sets[c.Set], f.sets[c.Args[0]]
		if a == nil || b == nil || a.Type != b.Type || a.Family != b.Family {
			return fmt.Errorf("sets %s and %s cannot be swapped", c.Set, c.Args[0])
		}
		f.sets[c.Set], f.sets[c.Args[0]] = b, a
		a.Name, b.Name = b.Name, a.Name
	}
	return nil
}

func (f *FakeIPSet) create(c ipset.Command) error {
	typ, opts := c.Args[0], c.Args[1:]
	if !ipset.KnownType(typ) {
		return fmt.Errorf("unknown set type %q", typ)
	}
	fam := ipset.FamilyOption(opts)
	switch {
	case typ == ipset.BitmapPort && !slices.Contains(opts, "range"):
		return fmt.Errorf("bitmap:port needs a range")
	case typ != ipset.BitmapPort && fam == "":
		fam = ipset.FamilyINet
	case typ != ipset.BitmapPort && fam != ipset.FamilyINet && fam != ipset.FamilyINet6:
		return fmt.Errorf("unknown family %q", fam)
	}
	if old, ok := f.sets[c.Set]; ok {
		if c.Exist && old.Type == typ && old.Family == fam {
			return nil
		}
		return fmt.Errorf("Set cannot be created: set with the same name already exists")
	}
	f.sets[c.Set] = &ipset.Set{Name: c.Set, Type: typ, Family: fam, Options: slices.Clone(opts), Entries: map[string]struct{}{}}
	return nil
}

func (f *FakeIPSet) addDel(c ipset.Command) error {
	s, ok := f.sets[c.Set]
	if !ok {
		return fmt.Errorf("The set with the given name does not exist")
	}
	e, err := ipset.ParseEntry(s.Type, c.Args[0])
	if err != nil {
		return err
	}
	if s.Type != ipset.BitmapPort && e.IP.Is4() != (s.Family == ipset.FamilyINet) {
		return fmt.Errorf("entry %s is not of family %s", c.Args[0], s.Family)
	}
	canon := e.Format(s.Type)
	_, present := s.Entries[canon]
	switch {
	case c.Op == "add" && present && !c.Exist:
		return fmt.Errorf("Element cannot be added to the set: it's already added")
	case c.Op == "add":
		s.Entries[canon] = struct{}{}
	case !present && !c.Exist:
		return fmt.Errorf("Element cannot be deleted from the set: it's not added")
	default:
		delete(s.Entries, canon)
	}
	return nil
}

func (f *FakeIPSet) destroy(name string) error {
	return f.each(name, func(s *ipset.Set) error {
		if f.inUse != nil && f.inUse(s.Name) {
			return fmt.Errorf("Set cannot be destroyed: it is in use by a kernel component")
		}
		delete(f.sets, s.Name)
		return nil
	})
}

// each runs fn on the named set, or on every set when name is "".
func (f *FakeIPSet) each(name string, fn func(*ipset.Set) error) error {
	if name != "" {
		s, ok := f.sets[name]
		if !ok {
			return fmt.Errorf("The set with the given name does not exist")
		}
		return fn(s)
	}
	for _, n := range slices.Sorted(maps.Keys(f.sets)) {
		if err := fn(f.sets[n]); err != nil {
			return err
		}
	}
	return nil
}
