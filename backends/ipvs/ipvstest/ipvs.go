package ipvstest

import (
	"fmt"
	"net"
	"net/netip"
	"sort"
	"strings"
	"sync"
	"syscall"

	"github.com/moby/ipvs"
)

// schedulers the fake kernel has modules for.
var schedulers = map[string]bool{"rr": true, "wrr": true, "lc": true, "wlc": true, "lblc": true,
	"lblcr": true, "dh": true, "sh": true, "sed": true, "nq": true, "mh": true, "fo": true, "ovf": true}

const flagHashed = 0x0002

// FakeIPVS is a stateful IPVS table. Safe for concurrent use.
type FakeIPVS struct {
	mu       sync.Mutex
	services map[string]*fakeService
	config   ipvs.Config
	ops      []string
	failNext map[string]error
}

type fakeService struct {
	svc   ipvs.Service
	dests map[netip.AddrPort]*ipvs.Destination
}

// NewFakeIPVS returns an empty table with the kernel's default timeouts.
func NewFakeIPVS() *FakeIPVS {
	return &FakeIPVS{services: map[string]*fakeService{}, failNext: map[string]error{},
		config: ipvs.Config{TimeoutTCP: 900e9, TimeoutTCPFin: 120e9, TimeoutUDP: 300e9}}
}

// ServiceKey names a service the way the backend's metrics do:
// "TCP/10.96.0.10:80", "UDP/[fd00::1]:53" or "FWM/0x10000/IPv4".
func ServiceKey(s *ipvs.Service) string {
	fam := "IPv4"
	if s.AddressFamily == syscall.AF_INET6 {
		fam = "IPv6"
	}
	if s.FWMark != 0 {
		return fmt.Sprintf("FWM/%#x/%s", s.FWMark, fam)
	}
	a, _ := netip.AddrFromSlice(s.Address)
	proto := map[uint16]string{syscall.IPPROTO_TCP: "TCP", syscall.IPPROTO_UDP: "UDP", syscall.IPPROTO_SCTP: "SCTP"}[s.Protocol]
	if proto == "" {
		proto = fmt.Sprintf("proto%d", s.Protocol)
	}
	return proto + "/" + netip.AddrPortFrom(a.Unmap(), s.Port).String()
}

func destAddrPort(d *ipvs.Destination) netip.AddrPort {
	a, _ := netip.AddrFromSlice(d.Address)
	return netip.AddrPortFrom(a.Unmap(), d.Port)
}

// FailNext makes the next call of the named method ("NewService",
// "GetServices", ...) fail with err.
func (f *FakeIPVS) FailNext(method string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failNext[method] = err
}

func (f *FakeIPVS) injected(method string) error {
	if err, ok := f.failNext[method]; ok {
		delete(f.failNext, method)
		return err
	}
	return nil
}

// Ops returns every state-changing call so far, e.g. "NewService
// TCP/10.96.0.10:80 rr", "UpdateDestination TCP/10.96.0.10:80
// 10.244.1.2:8080 weight=0".
func (f *FakeIPVS) Ops() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.ops...)
}

// ResetOps forgets the recorded calls.
func (f *FakeIPVS) ResetOps() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ops = nil
}

func (f *FakeIPVS) record(format string, a ...any) { f.ops = append(f.ops, fmt.Sprintf(format, a...)) }

func copyService(s *ipvs.Service) *ipvs.Service {
	c := *s
	c.Address = append(net.IP(nil), s.Address...)
	return &c
}

func copyDest(d *ipvs.Destination) *ipvs.Destination {
	c := *d
	c.Address = append(net.IP(nil), d.Address...)
	return &c
}

// checkService rejects what the kernel rejects when creating or updating.
func checkService(s *ipvs.Service) error {
	if s.AddressFamily != syscall.AF_INET && s.AddressFamily != syscall.AF_INET6 {
		return syscall.EAFNOSUPPORT
	}
	if !schedulers[s.SchedName] {
		return syscall.ENOENT // no such scheduler module
	}
	if s.FWMark == 0 {
		a, ok := netip.AddrFromSlice(s.Address)
		if !ok || a.Unmap().Is4() != (s.AddressFamily == syscall.AF_INET) {
			return syscall.EINVAL
		}
	}
	return nil
}

// Dump lists the table like `ipvsadm -Ln`, sorted: one line per
// service, one indented line per real server.
func (f *FakeIPVS) Dump() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	keys := make([]string, 0, len(f.services))
	for k := range f.services {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		s := f.services[k]
		fmt.Fprintf(&b, "%s %s", k, s.svc.SchedName)
		if s.svc.Flags&0x1 != 0 {
			fmt.Fprintf(&b, " persistent %d", s.svc.Timeout)
		}
		b.WriteString("\n")
		for _, d := range sortedDests(s) {
			fmt.Fprintf(&b, "  -> %s Masq weight=%d active=%d inactive=%d\n",
				destAddrPort(d), d.Weight, d.ActiveConnections, d.InactiveConnections)
		}
	}
	return b.String()
}

func sortedDests(s *fakeService) []*ipvs.Destination {
	out := make([]*ipvs.Destination, 0, len(s.dests))
	for _, d := range s.dests {
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return destAddrPort(out[i]).Compare(destAddrPort(out[j])) < 0 })
	return out
}
