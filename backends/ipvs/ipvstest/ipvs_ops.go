package ipvstest

import (
	"fmt"
	"net/netip"
	"sort"
	"syscall"

	"github.com/moby/ipvs"
)

// GetServices implements the backend's IPVS interface. Like the kernel it
// reports the internal "hashed" flag.
func (f *FakeIPVS) GetServices() ([]*ipvs.Service, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.injected("GetServices"); err != nil {
		return nil, err
	}
	keys := make([]string, 0, len(f.services))
	for k := range f.services {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]*ipvs.Service, 0, len(keys))
	for _, k := range keys {
		s := copyService(&f.services[k].svc)
		s.Flags |= flagHashed
		out = append(out, s)
	}
	return out, nil
}

// GetService implements the backend's IPVS interface (ESRCH when the
// service does not exist).
func (f *FakeIPVS) GetService(s *ipvs.Service) (*ipvs.Service, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.injected("GetService"); err != nil {
		return nil, err
	}
	cur, ok := f.services[ServiceKey(s)]
	if !ok {
		return nil, syscall.ESRCH
	}
	out := copyService(&cur.svc)
	out.Flags |= flagHashed
	return out, nil
}

// NewService implements the backend's IPVS interface.
func (f *FakeIPVS) NewService(s *ipvs.Service) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.injected("NewService"); err != nil {
		return err
	}
	if err := checkService(s); err != nil {
		return err
	}
	k := ServiceKey(s)
	if _, ok := f.services[k]; ok {
		return syscall.EEXIST
	}
	f.services[k] = &fakeService{svc: *copyService(s), dests: map[netip.AddrPort]*ipvs.Destination{}}
	f.record("NewService %s %s", k, s.SchedName)
	return nil
}

// UpdateService implements the backend's IPVS interface.
func (f *FakeIPVS) UpdateService(s *ipvs.Service) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.injected("UpdateService"); err != nil {
		return err
	}
	if err := checkService(s); err != nil {
		return err
	}
	cur, ok := f.services[ServiceKey(s)]
	if !ok {
		return syscall.ESRCH
	}
	cur.svc = *copyService(s)
	f.record("UpdateService %s %s", ServiceKey(s), s.SchedName)
	return nil
}

// DelService implements the backend's IPVS interface.
func (f *FakeIPVS) DelService(s *ipvs.Service) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.injected("DelService"); err != nil {
		return err
	}
	k := ServiceKey(s)
	if _, ok := f.services[k]; !ok {
		return syscall.ESRCH
	}
	delete(f.services, k)
	f.record("DelService %s", k)
	return nil
}

// GetDestinations implements the backend's IPVS interface.
func (f *FakeIPVS) GetDestinations(s *ipvs.Service) ([]*ipvs.Destination, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.injected("GetDestinations"); err != nil {
		return nil, err
	}
	cur, ok := f.services[ServiceKey(s)]
	if !ok {
		return nil, syscall.ESRCH
	}
	var out []*ipvs.Destination
	for _, d := range sortedDests(cur) {
		out = append(out, copyDest(d))
	}
	return out, nil
}

func (f *FakeIPVS) destOp(method string, s *ipvs.Service, d *ipvs.Destination) (*fakeService, netip.AddrPort, error) {
	if err := f.injected(method); err != nil {
		return nil, netip.AddrPort{}, err
	}
	cur, ok := f.services[ServiceKey(s)]
	if !ok {
		return nil, netip.AddrPort{}, syscall.ESRCH
	}
	ap := destAddrPort(d)
	if !ap.Addr().IsValid() || d.Weight < 0 {
		return nil, ap, syscall.EINVAL
	}
	if d.ConnectionFlags&ipvs.ConnectionFlagFwdMask == ipvs.ConnectionFlagMasq &&
		ap.Addr().Is4() != (cur.svc.AddressFamily == syscall.AF_INET) {
		return nil, ap, syscall.EINVAL // NAT needs the service's family
	}
	return cur, ap, nil
}

// NewDestination implements the backend's IPVS interface.
func (f *FakeIPVS) NewDestination(s *ipvs.Service, d *ipvs.Destination) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	cur, ap, err := f.destOp("NewDestination", s, d)
	if err != nil {
		return err
	}
	if _, ok := cur.dests[ap]; ok {
		return syscall.EEXIST
	}
	n := copyDest(d)
	n.ActiveConnections, n.InactiveConnections = 0, 0
	cur.dests[ap] = n
	f.record("NewDestination %s %s weight=%d", ServiceKey(s), ap, d.Weight)
	return nil
}

// UpdateDestination implements the backend's IPVS interface; connection
// counts are kept.
func (f *FakeIPVS) UpdateDestination(s *ipvs.Service, d *ipvs.Destination) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	cur, ap, err := f.destOp("UpdateDestination", s, d)
	if err != nil {
		return err
	}
	old, ok := cur.dests[ap]
	if !ok {
		return syscall.ENOENT
	}
	n := copyDest(d)
	n.ActiveConnections, n.InactiveConnections = old.ActiveConnections, old.InactiveConnections
	cur.dests[ap] = n
	f.record("UpdateDestination %s %s weight=%d", ServiceKey(s), ap, d.Weight)
	return nil
}

// DelDestination implements the backend's IPVS interface.
func (f *FakeIPVS) DelDestination(s *ipvs.Service, d *ipvs.Destination) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	cur, ap, err := f.destOp("DelDestination", s, d)
	if err != nil {
		return err
	}
	if _, ok := cur.dests[ap]; !ok {
		return syscall.ENOENT
	}
	delete(cur.dests, ap)
	f.record("DelDestination %s %s", ServiceKey(s), ap)
	return nil
}

// GetConfig implements the backend's IPVS interface.
func (f *FakeIPVS) GetConfig() (*ipvs.Config, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.config
	return &c, nil
}

// SetConfig implements the backend's IPVS interface: zero leaves a
// timeout unchanged.
func (f *FakeIPVS) SetConfig(c *ipvs.Config) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c.TimeoutTCP > 0 {
		f.config.TimeoutTCP = c.TimeoutTCP
	}
	if c.TimeoutTCPFin > 0 {
		f.config.TimeoutTCPFin = c.TimeoutTCPFin
	}
	if c.TimeoutUDP > 0 {
		f.config.TimeoutUDP = c.TimeoutUDP
	}
	f.record("SetConfig tcp=%v tcpfin=%v udp=%v", c.TimeoutTCP, c.TimeoutTCPFin, c.TimeoutUDP)
	return nil
}

// SetStats sets a virtual server's counters (ServiceKey names it), as the
// kernel's own counting would; GetServices returns them.
func (f *FakeIPVS) SetStats(key string, stats ipvs.SvcStats) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.services[key]
	if !ok {
		return fmt.Errorf("no virtual server %s", key)
	}
	s.svc.Stats = stats
	return nil
}
