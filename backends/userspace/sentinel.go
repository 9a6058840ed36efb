package userspace

import (
	"errors"
	"net"
	"net/netip"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// A sentinel is a transparent socket on an address and port a service is
// reached at from outside the node (cluster, external and load-balancer
// IPs; NodePorts on the wildcard address). It carries no traffic: its
// existence is what mangle PREROUTING's `-m socket --transparent` looks
// for, and a match marks the packet, which sends it to the proxy socket
// (nat REDIRECT). Sentinels live exactly as long as the process, so when
// the daemon dies (even by SIGKILL) the kernel closes them, packets stay
// unmarked, and the nat fallback DNATs new connections straight to the
// endpoints until a new daemon has written rules for its new proxy ports
// and opened its sentinels again. See doc.go, "Restarts".
type sentinelKey struct {
	family v1.IPFamily
	proto  v1.Protocol
	addr   netip.AddrPort // unspecified address: a NodePort
}

// sentinel is one open sentinel socket.
type sentinel struct {
	close func()
}

// sentinelKeys lists the sentinels the plans need: those of service
// ports with a usable endpoint somewhere. Without one, the filter chain
// REJECTs, and the ICMP error it sends from the service address only
// leaves the node for a forwarded packet, not for one delivered locally
// to a sentinel (the kernel cannot route from a non-local source).
//
// NodePort sentinels bind nodePortAddrs: the wildcard address, or with
// --nodeport-addresses the local addresses inside the prefixes (a
// wildcard sentinel would accept, and then reset, connections to the
// other addresses, which must be refused, and hold the port there).
func sentinelKeys(keys map[sentinelKey]string, plans []servicePlan, nodePortAddrs []netip.Addr) {
	for i := range plans {
		if !plans[i].hasAny {
			continue
		}
		sp := plans[i].sp
		fam := plans[i].family
		add := func(ip netip.Addr, port uint16) {
			keys[sentinelKey{family: fam, proto: sp.Protocol, addr: netip.AddrPortFrom(ip, port)}] = sp.Name.String()
		}
		ip, _ := sp.ClusterIP(fam)
		add(ip.Unmap(), sp.Port)
		for _, ip := range addrsOfFamily(sp.ExternalIPs, fam) {
			add(ip, sp.Port)
		}
		for _, ip := range addrsOfFamily(sp.LoadBalancerIPs, fam) {
			add(ip, sp.Port)
		}
		if sp.NodePort != 0 {
			for _, a := range nodePortAddrs {
				add(a, sp.NodePort)
			}
		}
	}
}

// sentinelSet is the open sentinels, opened through cfg.Sockets (the
// Backend's lock guards it).
type sentinelSet struct {
	cfg  *Config
	open map[sentinelKey]sentinel
}

func newSentinelSet(cfg *Config) *sentinelSet {
	return &sentinelSet{cfg: cfg, open: map[sentinelKey]sentinel{}}
}

// has reports whether k's sentinel is open.
func (ss *sentinelSet) has(k sentinelKey) bool { _, ok := ss.open[k]; return ok }

// sync closes the sentinels not in want and opens the missing ones. It
// runs after the rules were written: a sentinel must never mark traffic
// for a proxy port the rules do not lead to yet. A sentinel that cannot
// be opened (a NodePort another process holds) is logged and tried again
// on the next sync; meanwhile its traffic takes the fallback.
func (ss *sentinelSet) sync(want map[sentinelKey]string) {
	for k, s := range ss.open {
		if _, ok := want[k]; !ok {
			s.close()
			delete(ss.open, k)
		}
	}
	ss.openMissing(want)
}

// openMissing opens the sentinels of want that are not open.
func (ss *sentinelSet) openMissing(want map[sentinelKey]string) {
	for k, label := range want {
		if ss.has(k) {
			continue
		}
		s, err := ss.openOne(k)
		if err != nil {
			klog.ErrorS(err, "Cannot open sentinel socket; the service's traffic takes the kernel fallback",
				"servicePort", label, "protocol", k.proto, "address", k.addr)
			continue
		}
		ss.open[k] = s
	}
}

// early picks the UDP sentinels of want that may open before this sync's
// rules are written: those of a family whose rules this daemon has
// written before (written). Opened after the rules, a new UDP service's
// sentinel leaves a gap in which datagrams take the fallback DNAT, which
// has no session affinity; a UDP client keeps that flow's endpoint while
// the proxy may pin it to another (upstream's "client IP based session
// affinity: udp" spec caught it). Opening it first is safe once only this
// daemon's rules are in the kernel: they have no REDIRECT for the address
// yet, so a marked datagram is delivered to the sentinel itself, which
// drops it, as the missing rules would have; the client's retry meets the
// REDIRECT. Not on a daemon's first sync, when a predecessor's rules may
// REDIRECT marked traffic to its dead proxy ports, and not for TCP, where
// the sentinel would answer an early SYN with a reset instead of letting
// the client retransmit.
func (ss *sentinelSet) early(want map[sentinelKey]string, written func(v1.IPFamily) bool) map[sentinelKey]string {
	early := map[sentinelKey]string{}
	for k, label := range want {
		if ss.has(k) || k.proto != v1.ProtocolUDP || !written(k.family) {
			continue
		}
		early[k] = label
	}
	return early
}

func (ss *sentinelSet) openOne(k sentinelKey) (sentinel, error) {
	if k.proto == v1.ProtocolUDP {
		c, err := ss.cfg.Sockets.ListenTransparentUDP(k.addr)
		if err != nil {
			return sentinel{}, err
		}
		return sentinel{close: func() { c.Close() }}, nil
	}
	ln, err := ss.cfg.Sockets.ListenTransparentTCP(k.addr)
	if err != nil {
		return sentinel{}, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		refuseAll(ln)
	}()
	return sentinel{close: func() { ln.Close(); <-done }}, nil
}

// closeAll closes every sentinel: from now on the kernel fallback takes
// new connections.
func (ss *sentinelSet) closeAll() {
	for k, s := range ss.open {
		s.close()
		delete(ss.open, k)
	}
}

// refuseAll resets every connection that reaches a sentinel: only a
// packet path the rules do not foresee (rules removed by hand) gets there.
func refuseAll(ln *net.TCPListener) {
	for {
		c, err := ln.AcceptTCP()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			time.Sleep(10 * time.Millisecond) // e.g. out of descriptors
			continue
		}
		abort(c)
	}
}
