package ipvs

import (
	"errors"
	"net/netip"

	"github.com/moby/ipvs"

	"github.com/switchyard-proxy/switchyard/backends/ipvs/ipset"
	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
)

// IPVS is the part of github.com/moby/ipvs' *Handle the backend uses
// (Flush is left out on purpose: the backend reconciles, it never
// flushes), plus ReadTable. Errors are the kernel's errno values
// (syscall.EEXIST, ESRCH, ENOENT...).
type IPVS interface {
	GetServices() ([]*ipvs.Service, error)
	// GetService reads one service (ESRCH when it does not exist).
	GetService(*ipvs.Service) (*ipvs.Service, error)
	NewService(*ipvs.Service) error
	UpdateService(*ipvs.Service) error
	DelService(*ipvs.Service) error
	GetDestinations(*ipvs.Service) ([]*ipvs.Destination, error)
	NewDestination(*ipvs.Service, *ipvs.Destination) error
	UpdateDestination(*ipvs.Service, *ipvs.Destination) error
	DelDestination(*ipvs.Service, *ipvs.Destination) error
	GetConfig() (*ipvs.Config, error)
	SetConfig(*ipvs.Config) error
	// ReadTable reads every virtual server with its real servers at once
	// (the real kernel's /proc/net/ip_vs): the periodic verification's
	// one read, where GetDestinations costs a netlink round trip per
	// virtual server.
	ReadTable() ([]TableEntry, error)
}

// TableEntry is one virtual server as ReadTable returns it. The
// Service has its key, scheduler, persistence flag and timeout;
// /proc/net/ip_vs does not show a fwmark service's family, so
// AddressFamily is 0 for those.
type TableEntry struct {
	Service *ipvs.Service
	Dests   []TableDest
}

// TableDest is one real server as ReadTable returns it (plain values:
// a table holds a real server per endpoint of every service).
type TableDest struct {
	Addr    netip.AddrPort
	Forward uint32 // ipvs.ConnectionFlagFwdMask bits: ipvs.ConnectionFlagMasq, ...
	Weight  int
	// Active and Inactive are the connection counts.
	Active, Inactive int
}

// ErrLinkNotFound is returned (wrapped) by Netlink for a missing link.
var ErrLinkNotFound = errors.New("link not found")

// Netlink is the interface and address management the backend needs, in
// one network namespace.
type Netlink interface {
	// EnsureDummy creates a dummy interface unless it exists.
	EnsureDummy(name string) error
	// DeleteLink deletes an interface; no error if it is absent.
	DeleteLink(name string) error
	// ListAddresses lists the addresses of an interface (ErrLinkNotFound
	// when it is absent).
	ListAddresses(link string) ([]netip.Addr, error)
	// AddAddress binds a host address (/32 or /128) to an interface; no
	// error if it is already there.
	AddAddress(link string, addr netip.Addr) error
	// DelAddress removes an address; no error if it is not there.
	DelAddress(link string, addr netip.Addr) error
}

// Sysctl reads and writes kernel parameters by their /proc/sys path
// ("net/ipv4/vs/conntrack"), in one network namespace.
type Sysctl interface {
	Get(name string) (string, error)
	Set(name, value string) error
}

// Kernel bundles the kernel interfaces the backend is built on. Tests
// use the fakes of backends/ipvs/ipvstest; NewKernel builds the real ones.
type Kernel struct {
	IPVS     IPVS
	Netlink  Netlink
	IPSet    ipset.Interface
	Sysctl   Sysctl
	IPTables runner.Interface

	closers []func()
}

// Close releases the handles NewKernel opened.
func (k *Kernel) Close() {
	for _, c := range k.closers {
		c()
	}
	k.closers = nil
}
