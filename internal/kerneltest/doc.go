// Package kerneltest holds what every kernel-touching test in switchyard
// shares: the guard that runs them only as root with
// SWITCHYARD_KERNEL_TESTS=1, throw-away network namespaces that are
// deleted when the test ends (failed or not), and running code inside one.
// Tests never change the host namespace's rules: everything they do
// happens in namespaces made here.
package kerneltest
