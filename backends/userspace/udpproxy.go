package userspace

import (
	"errors"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// udpBufferSize holds the largest UDP payload.
const udpBufferSize = 65535

// udpProxy relays datagrams between clients and endpoints: one session
// (a socket connected to the endpoint) per client address and port.
type udpProxy struct {
	proxyBase
	conn  *net.UDPConn
	v4    bool
	clock clock.WithTicker
	idle  time.Duration
	max   int // sessions; negative: no cap
	tick  clock.Ticker
	stop  chan struct{}
	wg    sync.WaitGroup

	mu       sync.Mutex
	sessions map[netip.AddrPort]*udpSession
	closed   bool
	atCap    bool // the cap was reached; logged once until it is left
}

// udpLimits bound a UDP proxy socket's sessions.
type udpLimits struct {
	idle        time.Duration // a session idle this long ends
	maxSessions int           // concurrent sessions; negative: no cap
}

// udpSession is one client's flow to its endpoint.
type udpSession struct {
	client   netip.AddrPort
	endpoint netip.AddrPort
	conn     *net.UDPConn // connected to endpoint
	oob      []byte       // replies leave from the address the client used
	lastSeen atomic.Int64 // clock time of the last datagram, Unix ns
}

func (s *udpSession) touch(clk clock.PassiveClock) { s.lastSeen.Store(clk.Now().UnixNano()) }

var _ proxySocket = (*udpProxy)(nil)

func newUDPProxy(base proxyBase, addr netip.AddrPort, clk clock.WithTicker, lim udpLimits) (*udpProxy, error) {
	idle := lim.idle
	conn, err := base.sockets.ListenUDP(addr)
	if err != nil {
		return nil, err
	}
	v4 := addr.Addr().Unmap().Is4()
	if err := enablePktinfo(conn, v4); err != nil {
		conn.Close()
		return nil, err
	}
	p := &udpProxy{proxyBase: base, conn: conn, v4: v4, clock: clk, idle: idle, max: lim.maxSessions,
		stop: make(chan struct{}), sessions: map[netip.AddrPort]*udpSession{}}
	// The ticker exists before New returns, so a fake clock stepped right
	// after a sync expires sessions.
	p.tick = clk.NewTicker(max(idle/2, time.Millisecond))
	p.wg.Add(2)
	go p.serve()
	go p.expireLoop()
	return p, nil
}

func (p *udpProxy) port() uint16 { return p.conn.LocalAddr().(*net.UDPAddr).AddrPort().Port() }

func (p *udpProxy) active() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.sessions)
}

// update swaps the endpoints and ends the sessions to removed ones; their
// clients' next datagrams start new sessions.
func (p *udpProxy) update(eps []netip.AddrPort, affinity time.Duration) {
	removed := p.bal.update(eps, affinity)
	if len(removed) == 0 {
		return
	}
	p.endSessions(func(s *udpSession) bool { return slices.Contains(removed, s.endpoint) })
}

func (p *udpProxy) serve() {
	defer p.wg.Done()
	buf := make([]byte, udpBufferSize)
	oob := make([]byte, oobSize)
	for {
		n, oobn, _, client, err := p.conn.ReadMsgUDPAddrPort(buf, oob)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			klog.V(4).InfoS("Reading a proxied datagram failed", "servicePort", p.label, "err", err)
			continue
		}
		p.forward(buf[:n], oob[:oobn], unmapAddrPort(client))
	}
}

// forward sends a client's datagram to its session's endpoint, starting
// the session if needed. Only serve calls it, so sessions are never
// started twice for one client.
func (p *udpProxy) forward(pkt, oob []byte, client netip.AddrPort) {
	p.traffic.pkts.Add(1)
	p.traffic.octets.Add(uint64(len(pkt)))
	p.mu.Lock()
	s := p.sessions[client]
	p.mu.Unlock()
	if s == nil {
		if s = p.newSession(client, packetDst(oob, p.v4)); s == nil {
			return
		}
	}
	s.touch(p.clock)
	if _, err := s.conn.Write(pkt); err != nil {
		p.endSession(s, err)
		return
	}
	p.pm.toEndpoint.Add(float64(len(pkt)))
}

func (p *udpProxy) newSession(client netip.AddrPort, local netip.Addr) *udpSession {
	p.traffic.conns.Add(1)
	if p.full() {
		p.pm.udpDropped.Inc()
		return nil
	}
	ep, ok := p.bal.pick(client.Addr(), nil)
	if !ok {
		p.pm.fail(ReasonNoEndpoints)
		return nil
	}
	conn, err := p.dialUDP(client.Addr(), ep)
	if err != nil {
		p.pm.fail(ReasonDialFailed)
		klog.V(4).InfoS("Opening a UDP session failed", "servicePort", p.label, "endpoint", ep, "err", err)
		return nil
	}
	s := &udpSession{client: client, endpoint: ep, conn: conn, oob: replyOOB(local, p.v4)}
	if !p.register(s) {
		conn.Close()
		return nil
	}
	// An update that removed ep while the session was being set up may
	// have missed it: it removes from the balancer before ending sessions.
	if !p.bal.has(ep) {
		p.endSession(s, nil)
		return nil
	}
	return s
}

// full reports whether the socket has its maximum number of sessions,
// logging when it reaches the cap (once until it drops below again).
// Only serve starts sessions, so the count cannot grow between this check
// and register.
func (p *udpProxy) full() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.max < 0 || len(p.sessions) < p.max {
		p.atCap = false
		return false
	}
	if !p.atCap {
		p.atCap = true
		klog.InfoS("UDP proxy socket reached its session cap; datagrams from new clients are dropped",
			"servicePort", p.label, "maxSessions", p.max)
	}
	return true
}

func (p *udpProxy) register(s *udpSession) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.sessions[s.client] = s
	p.pm.active.Inc()
	p.wg.Add(1)
	go p.reply(s)
	return true
}

// reply relays the endpoint's datagrams back to the client, from the
// proxy socket the client used.
func (p *udpProxy) reply(s *udpSession) {
	defer p.wg.Done()
	buf := make([]byte, udpBufferSize)
	for {
		n, err := s.conn.Read(buf)
		if err != nil {
			p.endSession(s, err)
			return
		}
		s.touch(p.clock)
		if _, _, err := p.conn.WriteMsgUDPAddrPort(buf[:n], s.oob, s.client); err != nil {
			p.endSession(s, err)
			return
		}
		p.pm.toClient.Add(float64(n))
	}
}

// endSession ends a session once, whoever notices first (its reply loop,
// the idle timer, an endpoint removal).
func (p *udpProxy) endSession(s *udpSession, cause error) {
	p.mu.Lock()
	current := p.sessions[s.client] == s
	if current {
		delete(p.sessions, s.client)
		p.pm.active.Dec()
	}
	p.mu.Unlock()
	s.conn.Close()
	if current && errors.Is(cause, syscall.ECONNREFUSED) {
		p.pm.fail(ReasonEndpointRefused)
		klog.V(4).InfoS("UDP endpoint refused; session closed", "servicePort", p.label, "endpoint", s.endpoint)
	}
}

func (p *udpProxy) endSessions(match func(*udpSession) bool) {
	p.mu.Lock()
	var ending []*udpSession
	for _, s := range p.sessions {
		if match(s) {
			ending = append(ending, s)
		}
	}
	p.mu.Unlock()
	for _, s := range ending {
		p.endSession(s, nil)
	}
}

// expireLoop ends sessions idle for the idle timeout, checking every half
// timeout: a session lives between one and one and a half timeouts after
// its last datagram.
func (p *udpProxy) expireLoop() {
	defer p.wg.Done()
	defer p.tick.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-p.tick.C():
			now := p.clock.Now().UnixNano()
			p.endSessions(func(s *udpSession) bool { return now-s.lastSeen.Load() >= int64(p.idle) })
		}
	}
}

// close ends everything: the listening socket is every session's reply
// path, so UDP sessions cannot drain.
func (p *udpProxy) close(bool) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	p.mu.Unlock()
	close(p.stop)
	p.conn.Close()
	p.endSessions(func(*udpSession) bool { return true })
	p.wg.Wait()
}

// endTo: UDP sessions to an endpoint end when it leaves the balancer.
func (p *udpProxy) endTo(map[netip.Addr]bool) int { return 0 }
