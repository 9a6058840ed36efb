package ipvstest

import (
	"fmt"
	"maps"
	"sync"
)

// FakeSysctl is a /proc/sys with the parameters the IPVS backend reads,
// at the kernel's defaults. Unknown names fail like a missing file.
type FakeSysctl struct {
	mu     sync.Mutex
	values map[string]string
	sets   []string
}

// NewFakeSysctl returns the defaults of a 6.1 kernel with ip_vs loaded.
func NewFakeSysctl() *FakeSysctl {
	return &FakeSysctl{values: map[string]string{
		"kernel/osrelease":                      "6.1.0-56-cloud-amd64",
		"net/ipv4/vs/conntrack":                 "0",
		"net/ipv4/vs/conn_reuse_mode":           "1",
		"net/ipv4/vs/expire_nodest_conn":        "0",
		"net/ipv4/vs/expire_quiescent_template": "0",
		"net/ipv4/ip_forward":                   "0",
		"net/ipv4/conf/all/arp_ignore":          "0",
		"net/ipv4/conf/all/arp_announce":        "0",
	}}
}

// Get implements ipvs.Sysctl.
func (s *FakeSysctl) Get(name string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.values[name]
	if !ok {
		return "", fmt.Errorf("open /proc/sys/%s: no such file or directory", name)
	}
	return v, nil
}

// Set implements ipvs.Sysctl.
func (s *FakeSysctl) Set(name, value string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.values[name]; !ok {
		return fmt.Errorf("open /proc/sys/%s: no such file or directory", name)
	}
	s.values[name] = value
	s.sets = append(s.sets, name+"="+value)
	return nil
}

// Values returns every parameter.
func (s *FakeSysctl) Values() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.values)
}

// Sets returns the writes so far, "name=value", in order.
func (s *FakeSysctl) Sets() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.sets...)
}

// Put sets a value without recording it (e.g. another kernel release).
func (s *FakeSysctl) Put(name, value string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.values[name] = value
}
