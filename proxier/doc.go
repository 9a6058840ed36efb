// Package proxier is switchyard's backend-agnostic core.
//
// Data flows one way: client-go informers feed the change trackers
// (ServiceChangeTracker, EndpointsChangeTracker), which keep (previous,
// current) per object and drop no-ops. The informers' transform converts
// each Service and EndpointSlice once, on arrival, to a compact form
// (compact.go) that their caches, the trackers and the State share. A snapshot of the trackers is an
// State (the trackers' maps, updated in place by the next snapshot) plus a
// Diff naming what changed since the last sync and what the last sync saw
// of it (Diff.Previous). The
// shared, pure endpoint selection (SelectEndpoints) decides which endpoints
// each kind of traffic may reach, so every backend has the same semantics.
// Local-traffic detection (kube-proxy's --detect-local-mode) is one
// decision too: a LocalDetector, resolved per IP family and node into the
// LocalMatch each backend renders.
// A Backend renders and applies a State; the SyncRunner decides when:
// paced by what syncs cost (a budget of wall time, a short holdoff after a
// quiet spell, an optional floor), with a periodic verifying sync, an
// hourly full one and retries after failure.
//
// Metrics (kube-proxy's names) and the /healthz, /livez and
// health-check-node-port servers live here too, so every backend reports the
// same way.
package proxier
