package healthcheck

import (
	"net/http"
	"strconv"

	"k8s.io/apimachinery/pkg/types"
)

// serviceHealthResponse is the health-check node port body, with
// kube-proxy's field names.
type serviceHealthResponse struct {
	Service struct {
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
	} `json:"service"`
	LocalEndpoints      int  `json:"localEndpoints"`
	ServiceProxyHealthy bool `json:"serviceProxyHealthy"`
}

// handler answers load balancer probes for one service: 200 when the node
// has local endpoints for it and the proxier is healthy, 503 otherwise.
// Like kube-proxy it also sends the local endpoint count as
// X-Load-Balancing-Endpoint-Weight.
func (s *ServiceHealthServer) handler(name types.NamespacedName) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		s.mu.RLock()
		_, open := s.services[name]
		count := s.endpoints[name]
		s.mu.RUnlock()
		if !open {
			// A request that raced with closing this service's server.
			count = 0
		}
		proxierHealthy := s.proxier == nil || s.proxier.IsHealthy()

		var resp serviceHealthResponse
		resp.Service.Namespace, resp.Service.Name = name.Namespace, name.Name
		resp.LocalEndpoints, resp.ServiceProxyHealthy = count, proxierHealthy
		code := http.StatusServiceUnavailable
		if count > 0 && proxierHealthy {
			code = http.StatusOK
		}
		w.Header().Set("X-Load-Balancing-Endpoint-Weight", strconv.Itoa(count))
		writeJSON(w, code, resp)
	})
}
