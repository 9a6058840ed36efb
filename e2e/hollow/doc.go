// Package hollow measures what many nodes' proxies cost one apiserver:
// `make hollow` (TestHollow, build tag e2e) seeds a real kube-apiserver
// with background Services, then runs N hollow proxies against it, first
// switchyard's (`switchyard hollow --count N`: the daemon's informers,
// trackers, snapshots and sync loop with a recording backend, N nodes in
// one process), then upstream's (N `kubemark --morph=proxy` processes),
// one after the other, and measures the apiserver's CPU and memory, the
// bytes it sends on watches, each proxy's memory, and how long an
// endpoint change takes to reach all N proxies.
//
// The files without the e2e tag are the harness's pure parts (its
// parsers, statistics and projection), tested by `make unit`.
package hollow
