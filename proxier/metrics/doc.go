// Package metrics defines switchyard's Prometheus metrics.
//
// The kube-proxy metrics keep upstream's names (namespace "kubeproxy"),
// types, help texts and histogram buckets (k8s.io/kubernetes
// pkg/proxy/metrics), so existing dashboards, alerts and clusterloader2
// measurements keep working. Metrics that only switchyard has carry the
// "switchyard_" prefix.
//
// Nothing is registered globally: New builds a Metrics value and registers
// every collector once on the registry the caller passes in. Backends, the
// runner and the health servers receive the *Metrics they should update.
// NewRegistry and Handler give the daemon a registry with the Go and process
// collectors and the /metrics HTTP handler.
package metrics
