package healthcheck

import (
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/switchyard-proxy/switchyard/proxier/metrics"
)

// ToBeDeletedTaint is the taint the cluster autoscaler puts on a node it is
// about to delete.
const ToBeDeletedTaint = "ToBeDeletedByClusterAutoscaler"

// DefaultHealthTimeout is used when ProxierHealthConfig.HealthTimeout is
// unset: kube-proxy uses twice the sync period, whose default is 30s.
const DefaultHealthTimeout = 60 * time.Second

// ProxierHealthConfig configures a ProxierHealthServer.
type ProxierHealthConfig struct {
	// HealthTimeout is how long a queued update may stay unsynced before
	// the proxier counts as unhealthy (kube-proxy: 2 × sync period).
	HealthTimeout time.Duration
	// Clock defaults to the real clock.
	Clock clock.PassiveClock
	// Listener defaults to NetListener.
	Listener Listener
	// Metrics, if set, receives kubeproxy_proxy_healthz_total and
	// kubeproxy_proxy_livez_total.
	Metrics *metrics.Metrics
}

// ProxierHealthChecker reports whether the proxier keeps up with changes.
// ServiceHealthServer uses it to fail health-check node ports of a stuck
// proxier.
type ProxierHealthChecker interface {
	IsHealthy() bool
}

// ProxierHealthServer tracks whether the proxier syncs in time and whether
// the node is eligible for traffic, and serves /healthz and /livez.
type ProxierHealthServer struct {
	clock         clock.PassiveClock
	listener      Listener
	metrics       *metrics.Metrics
	healthTimeout time.Duration

	mu sync.RWMutex
	// lastUpdated is the time of the last successful sync (zero before
	// the first one).
	lastUpdated time.Time
	// oldestQueued is when the oldest still-unsynced update was queued;
	// zero when nothing is pending.
	oldestQueued time.Time
	nodeEligible bool
}

var _ ProxierHealthChecker = (*ProxierHealthServer)(nil)

// NewProxierHealthServer returns a server that is healthy and node-eligible
// until told otherwise.
func NewProxierHealthServer(cfg ProxierHealthConfig) *ProxierHealthServer {
	s := &ProxierHealthServer{
		clock:         cfg.Clock,
		listener:      cfg.Listener,
		metrics:       cfg.Metrics,
		healthTimeout: cfg.HealthTimeout,
		// The node is eligible while starting up, until a node event says
		// otherwise (as kube-proxy).
		nodeEligible: true,
	}
	if s.clock == nil {
		s.clock = clock.RealClock{}
	}
	if s.listener == nil {
		s.listener = NetListener{}
	}
	if s.healthTimeout <= 0 {
		s.healthTimeout = DefaultHealthTimeout
	}
	return s
}

// QueuedUpdate records that a change is waiting for a sync. Only the
// oldest pending change counts: later calls before the next Updated do not
// restart the timeout.
func (s *ProxierHealthServer) QueuedUpdate() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.oldestQueued.IsZero() {
		s.oldestQueued = s.clock.Now()
	}
}

// Updated records a successful sync: everything queued so far is applied.
func (s *ProxierHealthServer) Updated() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.oldestQueued = time.Time{}
	s.lastUpdated = s.clock.Now()
}

// IsHealthy reports the proxier's health, ignoring the node.
func (s *ProxierHealthServer) IsHealthy() bool {
	healthy, _, _ := s.health()
	return healthy
}

// health returns whether the proxier is healthy, the last successful sync
// and the current time. Healthy means nothing is pending (also while
// starting up, before any sync), or the oldest pending update is younger
// than the health timeout.
func (s *ProxierHealthServer) health() (healthy bool, lastUpdated, now time.Time) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	now = s.clock.Now()
	healthy = s.oldestQueued.IsZero() || now.Sub(s.oldestQueued) < s.healthTimeout
	return healthy, s.lastUpdated, now
}

// SyncNode updates node eligibility from the node object: a node with a
// deletion timestamp or the ToBeDeletedTaint is not eligible. A nil node
// (the object was deleted) is not eligible either.
func (s *ProxierHealthServer) SyncNode(node *v1.Node) {
	eligible := nodeEligible(node)
	s.mu.Lock()
	defer s.mu.Unlock()
	if eligible != s.nodeEligible {
		klog.V(2).InfoS("Node eligibility for load balancer traffic changed", "eligible", eligible)
	}
	s.nodeEligible = eligible
}

// NodeEligible reports the node eligibility last computed by SyncNode.
func (s *ProxierHealthServer) NodeEligible() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.nodeEligible
}

func nodeEligible(node *v1.Node) bool {
	if node == nil || node.DeletionTimestamp != nil {
		return false
	}
	for _, t := range node.Spec.Taints {
		if t.Key == ToBeDeletedTaint {
			return false
		}
	}
	return true
}
