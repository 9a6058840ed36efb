package healthcheck

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// ServiceHealthConfig configures a ServiceHealthServer.
type ServiceHealthConfig struct {
	// NodeAddresses are the addresses health-check node ports listen on
	// (from --nodeport-addresses); empty means all local addresses.
	NodeAddresses []netip.Addr
	// Listener defaults to NetListener.
	Listener Listener
	// Proxier, if set, makes every service answer 503 while the proxier is
	// unhealthy.
	Proxier ProxierHealthChecker
}

// ServiceHealthServer runs the health-check node port servers of the
// Services with externalTrafficPolicy: Local. Its methods are safe for
// concurrent use; the sync loop is meant to call SyncServices and
// SyncEndpoints after each successful sync.
type ServiceHealthServer struct {
	addresses []netip.Addr
	listener  Listener
	proxier   ProxierHealthChecker

	mu        sync.RWMutex
	services  map[types.NamespacedName]*hcService
	endpoints map[types.NamespacedName]int
}

// hcService is the open health check of one Service.
type hcService struct {
	name    types.NamespacedName
	port    uint16
	servers []*http.Server
	// listeners are closed by close() too: a server whose Serve goroutine
	// has not started yet would only close its listener later, and the
	// port must be free when close returns.
	listeners []net.Listener
}

// NewServiceHealthServer returns a server with no services.
func NewServiceHealthServer(cfg ServiceHealthConfig) *ServiceHealthServer {
	s := &ServiceHealthServer{
		addresses: cfg.NodeAddresses,
		listener:  cfg.Listener,
		proxier:   cfg.Proxier,
		services:  map[types.NamespacedName]*hcService{},
		endpoints: map[types.NamespacedName]int{},
	}
	if s.listener == nil {
		s.listener = NetListener{}
	}
	return s
}

// SyncServices makes the open health checks match want (Service → its
// healthCheckNodePort): services no longer wanted, or whose port changed,
// are closed; new ones are opened; unchanged ones keep running. Entries
// with port 0 are ignored.
//
// A service that cannot be opened (e.g. the port is taken) is left closed
// and retried on the next call; the returned error names every such
// service. It is informational: callers should log it, not fail the sync.
func (s *ServiceHealthServer) SyncServices(want map[types.NamespacedName]uint16) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, svc := range s.services {
		if port, ok := want[name]; !ok || port != svc.port {
			klog.V(2).InfoS("Closing healthcheck", "service", name, "port", svc.port)
			svc.close()
			delete(s.services, name)
		}
	}
	var errs []error
	for name, port := range want {
		if port == 0 || s.services[name] != nil {
			continue
		}
		klog.V(2).InfoS("Opening healthcheck", "service", name, "port", port)
		svc, err := s.open(name, port)
		if err != nil {
			klog.ErrorS(err, "Failed to start healthcheck", "service", name, "port", port)
			errs = append(errs, fmt.Errorf("healthcheck for %s on port %d: %w", name, port, err))
			continue
		}
		s.services[name] = svc
	}
	return errors.Join(errs...)
}

// open listens on port on every configured address and serves there. On
// failure everything it opened is closed again. Called with s.mu held.
func (s *ServiceHealthServer) open(name types.NamespacedName, port uint16) (*hcService, error) {
	svc := &hcService{name: name, port: port}
	for _, addr := range s.listenAddrs(port) {
		l, err := s.listener.Listen(context.Background(), addr)
		if err != nil {
			svc.close()
			return nil, err
		}
		srv := &http.Server{Handler: s.handler(name), ReadHeaderTimeout: 10 * time.Second}
		svc.servers = append(svc.servers, srv)
		svc.listeners = append(svc.listeners, l)
		go serveHealthCheck(srv, l, name)
	}
	return svc, nil
}

// listenAddrs returns the "host:port" addresses for a health-check port.
func (s *ServiceHealthServer) listenAddrs(port uint16) []string {
	p := strconv.Itoa(int(port))
	if len(s.addresses) == 0 {
		return []string{net.JoinHostPort("", p)}
	}
	out := make([]string, 0, len(s.addresses))
	for _, a := range s.addresses {
		out = append(out, net.JoinHostPort(a.String(), p))
	}
	return out
}

func serveHealthCheck(srv *http.Server, l net.Listener, name types.NamespacedName) {
	klog.V(3).InfoS("Serving healthcheck", "service", name, "address", l.Addr())
	if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		klog.ErrorS(err, "Healthcheck server failed", "service", name)
	}
}

func (svc *hcService) close() {
	for _, srv := range svc.servers {
		if err := srv.Close(); err != nil {
			klog.ErrorS(err, "Failed to close healthcheck server", "service", svc.name)
		}
	}
	for _, l := range svc.listeners {
		if err := l.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			klog.ErrorS(err, "Failed to close healthcheck listener", "service", svc.name)
		}
	}
	svc.servers, svc.listeners = nil, nil
}

// SyncEndpoints sets the number of local endpoints of every service; a
// service missing from counts has none.
func (s *ServiceHealthServer) SyncEndpoints(counts map[types.NamespacedName]int) {
	next := make(map[types.NamespacedName]int, len(counts))
	for name, n := range counts {
		next[name] = n
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.endpoints = next
}

// Close stops every health check.
func (s *ServiceHealthServer) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, svc := range s.services {
		svc.close()
		delete(s.services, name)
	}
}
