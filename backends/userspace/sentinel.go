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

// syncSentinelsLocked closes the sentinels not in want and opens the
// missing ones. It runs after the rules were written: a sentinel must
// never mark traffic for a proxy port the rules do not lead to yet. A
// sentinel that cannot be opened (a NodePort another process holds) is
// logged and tried again on the next sync; meanwhile its traffic takes
// the fallback.
func (b *Backend) syncSentinelsLocked(want map[sentinelKey]string) {
	for k, s := range b.sentinels {
		if _, ok := want[k]; !ok {
			s.close()
			delete(b.sentinels, k)
		}
	}
	for k, label := range want {
		if _, ok := b.sentinels[k]; ok {
			continue
		}
		s, err := b.openSentinel(k)
		if err != nil {
			klog.ErrorS(err, "Cannot open sentinel socket; the service's traffic takes the kernel fallback",
				"servicePort", label, "protocol", k.proto, "address", k.addr)
			continue
		}
		b.sentinels[k] = s
	}
}

func (b *Backend) openSentinel(k sentinelKey) (sentinel, error) {
	if k.proto == v1.ProtocolUDP {
		c, err := b.cfg.Sockets.ListenTransparentUDP(k.addr)
		if err != nil {
			return sentinel{}, err
		}
		return sentinel{close: func() { c.Close() }}, nil
	}
	ln, err := b.cfg.Sockets.ListenTransparentTCP(k.addr)
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

// closeSentinelsLocked closes every sentinel: from now on the kernel
// fallback takes new connections.
func (b *Backend) closeSentinelsLocked() {
	for k, s := range b.sentinels {
		s.close()
		delete(b.sentinels, k)
	}
}
