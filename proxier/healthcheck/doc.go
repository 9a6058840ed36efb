// Package healthcheck serves switchyard's health endpoints, with
// kube-proxy's semantics (k8s.io/kubernetes pkg/proxy/healthcheck).
//
// ProxierHealthServer answers /healthz and /livez on --healthz-bind-address.
// The proxier is healthy unless a sync was queued (QueuedUpdate) and no
// successful sync (Updated) has followed it within the health timeout.
// /healthz additionally fails while the node is being deleted (deletion
// timestamp set, or the cluster autoscaler's ToBeDeletedByClusterAutoscaler
// taint), so cloud load balancers drain the node before it goes away;
// /livez ignores the node, so the kubelet does not restart a healthy proxy
// on a draining node.
//
// ServiceHealthServer opens one HTTP server per Service with
// externalTrafficPolicy: Local on its spec.healthCheckNodePort. Load
// balancers probe it to learn whether this node has local endpoints for the
// Service: 200 when it has some and the proxier is healthy, 503 otherwise.
//
// All sockets are opened through the Listener interface; NetListener is the
// real one and LoopbackListener a stateful fake for tests.
package healthcheck
