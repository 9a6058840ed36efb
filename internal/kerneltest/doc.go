// Package kerneltest holds what every kernel-touching test in switchyard
// shares: the guard that runs them only as root with
// SWITCHYARD_KERNEL_TESTS=1, throw-away network namespaces that are
// deleted when the test ends (failed or not), and running code inside one;
// and LocalTrafficTopology, the node with a bridge pod, a routed "cali"
// pod, an outside client and an endpoint on which every mode's
// local-traffic detection (--detect-local-mode) is checked with real
// connections.
// Tests never change the host namespace's rules: everything they do
// happens in namespaces made here.
package kerneltest
