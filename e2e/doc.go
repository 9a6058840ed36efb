// Package e2e holds switchyard's end-to-end tests (build tag `e2e`, run as
// root): a real kube-apiserver, network-namespace nodes and pods, the real
// daemon binary and real traffic. The harness is package e2e/framework.
//
//	go test -tags e2e ./e2e/ -v
//
// Set SWITCHYARD_KUBECONFIG to reuse a running control plane (from
// `hack/local-up.sh up`) instead of starting a private one, and
// SWITCHYARD_BIN to test a prebuilt daemon.
package e2e
