package nfacct

import "fmt"

// Fake is an in-memory nfacct. Unsupported makes Ensure fail as on a
// kernel without nfnetlink_acct.
type Fake struct {
	Counters    map[string]uint64
	Unsupported bool
}

var _ Interface = (*Fake)(nil)

// NewFake returns an empty Fake.
func NewFake() *Fake { return &Fake{Counters: map[string]uint64{}} }

// Ensure implements Interface.
func (f *Fake) Ensure(name string) error {
	if f.Unsupported {
		return fmt.Errorf("creating nfacct counter %s: protocol not supported", name)
	}
	if _, ok := f.Counters[name]; !ok {
		f.Counters[name] = 0
	}
	return nil
}

// Packets implements Interface.
func (f *Fake) Packets(name string) (uint64, error) {
	v, ok := f.Counters[name]
	if !ok {
		return 0, fmt.Errorf("%w: %s", ErrNotFound, name)
	}
	return v, nil
}
