// Package recording is a backend that programs nothing: it runs the shared
// endpoint selection for every service port a sync changes, keeps what a
// dataplane would hold (the selected endpoints' count per service port and
// family) and reports each sync, with its time and the service ports it
// changed, to a callback.
//
// It is the backend of `switchyard hollow` (one process running the
// daemon's API side for many node names, against a real apiserver, to
// measure what many nodes cost the control plane) and of tests that need a
// proxier without a kernel. It never touches the kernel.
package recording
