package userspace

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"
)

var (
	errNoEndpoints        = errors.New("no endpoints")
	errAllEndpointsFailed = errors.New("every endpoint failed")
)

// tcpProxy accepts connections on one proxy socket and relays each to an
// endpoint the balancer picks.
type tcpProxy struct {
	proxyBase
	ln          *net.TCPListener
	dialTimeout time.Duration
	ctx         context.Context // cancelled by close(false): aborts dials
	cancel      context.CancelFunc
	accepting   sync.WaitGroup
	live        atomic.Int64 // connections being set up or relayed

	mu     sync.Mutex
	conns  map[*net.TCPConn]*net.TCPConn // client -> endpoint connection
	closed bool                          // close(false) ran
}

var _ proxySocket = (*tcpProxy)(nil)

func newTCPProxy(base proxyBase, addr netip.AddrPort, dialTimeout time.Duration) (*tcpProxy, error) {
	ln, err := base.sockets.ListenTCP(addr)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &tcpProxy{proxyBase: base, ln: ln, dialTimeout: dialTimeout, ctx: ctx, cancel: cancel,
		conns: map[*net.TCPConn]*net.TCPConn{}}
	p.accepting.Add(1)
	go p.serve()
	return p, nil
}

func (p *tcpProxy) port() uint16 { return p.ln.Addr().(*net.TCPAddr).AddrPort().Port() }

func (p *tcpProxy) active() int { return int(p.live.Load()) }

func (p *tcpProxy) update(eps []netip.AddrPort, affinity time.Duration) {
	p.bal.update(eps, affinity)
}

func (p *tcpProxy) serve() {
	defer p.accepting.Done()
	var backoff time.Duration
	for {
		c, err := p.ln.AcceptTCP()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// E.g. out of file descriptors: back off instead of spinning.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			klog.V(2).InfoS("Accepting a proxied connection failed", "servicePort", p.label, "err", err)
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		p.live.Add(1)
		go p.handle(c)
	}
}

func (p *tcpProxy) handle(client *net.TCPConn) {
	defer p.live.Add(-1)
	p.traffic.conns.Add(1)
	up, err := p.dial(clientIP(client))
	if err != nil {
		abort(client)
		return
	}
	if !p.track(client, up) {
		abort(client)
		abort(up)
		return
	}
	p.pm.active.Inc()
	relay(client, up, p.pm, &p.traffic.octets)
	p.pm.active.Dec()
	p.untrack(client)
}

// dial connects to an endpoint for client, trying each endpoint at most
// once, in round-robin order.
func (p *tcpProxy) dial(client netip.Addr) (*net.TCPConn, error) {
	tried := map[netip.AddrPort]bool{}
	skip := func(ep netip.AddrPort) bool { return tried[ep] }
	for {
		ep, ok := p.bal.pick(client, skip)
		if !ok {
			return nil, p.noEndpoint(len(tried))
		}
		tried[ep] = true
		ctx, cancel := context.WithTimeout(p.ctx, p.dialTimeout)
		c, err := p.dialTCP(ctx, client, ep)
		cancel()
		if err == nil {
			return c, nil
		}
		if p.ctx.Err() != nil {
			return nil, err
		}
		p.pm.fail(ReasonDialFailed)
		klog.V(4).InfoS("Connecting to an endpoint failed; trying the next one",
			"servicePort", p.label, "endpoint", ep, "err", err)
	}
}

func (p *tcpProxy) noEndpoint(tried int) error {
	if tried == 0 {
		p.pm.fail(ReasonNoEndpoints)
		return errNoEndpoints
	}
	p.pm.fail(ReasonAllEndpointsFailed)
	klog.V(4).InfoS("Every endpoint failed; closing the connection", "servicePort", p.label, "tried", tried)
	return errAllEndpointsFailed
}

func (p *tcpProxy) track(client, up *net.TCPConn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[client] = up
	return true
}

func (p *tcpProxy) untrack(client *net.TCPConn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.conns, client)
}

func (p *tcpProxy) close(drain bool) {
	p.ln.Close()
	p.accepting.Wait()
	if drain {
		return
	}
	p.cancel()
	p.mu.Lock()
	p.closed = true
	conns := p.conns
	p.conns = map[*net.TCPConn]*net.TCPConn{}
	p.mu.Unlock()
	for client, up := range conns {
		abort(client)
		abort(up)
	}
}

func clientIP(c *net.TCPConn) netip.Addr {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return a.AddrPort().Addr().Unmap()
	}
	return netip.Addr{}
}

// endTo aborts the socket's connections to the addresses.
func (p *tcpProxy) endTo(addrs map[netip.Addr]bool) int {
	p.mu.Lock()
	var ended []*net.TCPConn
	for client, up := range p.conns {
		if a, ok := up.RemoteAddr().(*net.TCPAddr); ok && addrs[a.AddrPort().Addr().Unmap()] {
			ended = append(ended, client, up)
			delete(p.conns, client)
		}
	}
	p.mu.Unlock()
	for _, c := range ended {
		abort(c)
	}
	return len(ended) / 2
}
