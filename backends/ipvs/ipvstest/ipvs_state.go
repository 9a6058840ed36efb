package ipvstest

import (
	"fmt"
	"net/netip"
	"sort"
	"syscall"

	"github.com/moby/ipvs"

	sy "github.com/switchyard-proxy/switchyard/backends/ipvs"
)

// RealServer is one real server as a test sees it.
type RealServer struct {
	Addr                netip.AddrPort
	Weight              int
	Active, Inactive    int
	ConnectionFlags     uint32
	AddressFamilyIsIPv6 bool
}

// VirtualServer is one service as a test sees it.
type VirtualServer struct {
	Key       string // ServiceKey form
	Scheduler string
	// Persistent and Timeout: sessionAffinity ClientIP.
	Persistent bool
	Timeout    uint32
	Netmask    uint32
	Mark       uint32
	Reals      []RealServer // sorted by address
}

// Services returns the table, sorted by key.
func (f *FakeIPVS) Services() []VirtualServer {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]VirtualServer, 0, len(f.services))
	for k, s := range f.services {
		v := VirtualServer{Key: k, Scheduler: s.svc.SchedName, Persistent: s.svc.Flags&0x1 != 0,
			Timeout: s.svc.Timeout, Netmask: s.svc.Netmask, Mark: s.svc.FWMark}
		for _, d := range sortedDests(s) {
			v.Reals = append(v.Reals, RealServer{Addr: destAddrPort(d), Weight: d.Weight,
				Active: d.ActiveConnections, Inactive: d.InactiveConnections,
				ConnectionFlags: d.ConnectionFlags, AddressFamilyIsIPv6: d.AddressFamily == syscall.AF_INET6})
		}
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// Service returns one service by key.
func (f *FakeIPVS) Service(key string) (VirtualServer, bool) {
	for _, v := range f.Services() {
		if v.Key == key {
			return v, true
		}
	}
	return VirtualServer{}, false
}

// SetConnections sets a real server's connection counts (what the
// kernel would count from traffic).
func (f *FakeIPVS) SetConnections(service, real string, active, inactive int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.services[service]
	if !ok {
		return fmt.Errorf("ipvstest: no service %s", service)
	}
	ap, err := netip.ParseAddrPort(real)
	if err != nil {
		return err
	}
	d, ok := s.dests[ap]
	if !ok {
		return fmt.Errorf("ipvstest: no real server %s in %s", real, service)
	}
	d.ActiveConnections, d.InactiveConnections = active, inactive
	return nil
}

// Add puts a service with real servers into the table without recording
// an op: state left behind by an earlier run.
func (f *FakeIPVS) Add(s *ipvs.Service, dests ...*ipvs.Destination) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := checkService(s); err != nil {
		return err
	}
	fs := &fakeService{svc: *copyService(s), dests: map[netip.AddrPort]*ipvs.Destination{}}
	for _, d := range dests {
		fs.dests[destAddrPort(d)] = copyDest(d)
	}
	f.services[ServiceKey(s)] = fs
	return nil
}

// Lookup finds the service a new connection is scheduled by, the way
// IPVS does: a fwmark service for the packet's mark first, then the
// service of its protocol, destination address and port.
func (f *FakeIPVS) Lookup(mark uint32, proto string, dst netip.AddrPort) (VirtualServer, bool) {
	fam := "IPv4"
	if dst.Addr().Is6() {
		fam = "IPv6"
	}
	if mark != 0 {
		if v, ok := f.Service(fmt.Sprintf("FWM/%#x/%s", mark, fam)); ok {
			return v, true
		}
	}
	return f.Service(proto + "/" + dst.String())
}

// ReadTable implements the backend's IPVS interface like
// /proc/net/ip_vs: every service with its real servers, sorted, and no
// family for fwmark services (the kernel's listing does not show it).
func (f *FakeIPVS) ReadTable() ([]sy.TableEntry, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.injected("ReadTable"); err != nil {
		return nil, err
	}
	keys := make([]string, 0, len(f.services))
	for k := range f.services {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]sy.TableEntry, 0, len(keys))
	for _, k := range keys {
		s := f.services[k]
		e := sy.TableEntry{Service: copyService(&s.svc)}
		if e.Service.FWMark != 0 {
			e.Service.AddressFamily = 0
		}
		for _, d := range sortedDests(s) {
			e.Dests = append(e.Dests, sy.TableDest{Addr: destAddrPort(d), Forward: d.ConnectionFlags & ipvs.ConnectionFlagFwdMask,
				Weight: d.Weight, Active: d.ActiveConnections, Inactive: d.InactiveConnections})
		}
		out = append(out, e)
	}
	return out, nil
}
