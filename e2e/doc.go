// Package e2e holds switchyard's end-to-end tests (build tag `e2e`, run as
// root): a real kube-apiserver, network-namespace nodes and pods, the real
// daemon binary and real traffic. The harness is package e2e/framework.
//
//	go test -tags e2e ./e2e/ -v
//
// Set SWITCHYARD_KUBECONFIG to reuse a running control plane (from
// `hack/local-up.sh up`) instead of starting a private one (and
// SWITCHYARD_ETCD_ENDPOINT to its etcd's client URL for the tests that seed
// objects straight into etcd, see SWITCHYARD_SCALE_SEED), and
// SWITCHYARD_BIN (SWITCHYARD_ECHOSERVER_BIN, SWITCHYARD_NSFORWARD_BIN) to
// test prebuilt binaries. SWITCHYARD_E2E_MODES picks TestDataplane's proxy
// modes (default "iptables userspace"); the ipvs mode runs in a VM with
// hack/vm/e2e-ipvs.sh, which sets all of these.
package e2e
