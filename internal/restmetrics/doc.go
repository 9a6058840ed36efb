// Package restmetrics exports client-go's request metrics under the names
// kube-proxy exports them (component-base's rest_client_* families:
// requests by code, method and host; request and client-side rate limiter
// latency by verb and host; retries), so that the kubernetes-mixin's
// kube-proxy dashboard ("Kube API Request Rate", the request latency
// panels) reads switchyard unchanged.
//
// client-go takes its metric hooks once per process (metrics.Register);
// Install sets them, Collectors returns what a registry serves.
package restmetrics
