// Package node holds the smoke test of switchyard on a real cluster (build
// tag `node`): kubelets on this machine (hack/cluster) run the DaemonSet from
// deploy/, and the test checks what an operator checks after installing it:
// the pods are Ready with their liveness probe answering and their logs
// readable, a pod reaches a Service by cluster IP, by DNS name and by
// NodePort on every node, and a rolling update of the DaemonSet to another
// image keeps a client's new connections flowing (failures are counted and
// must be zero).
//
//	hack/cluster/smoke.sh            # cluster up, this test, cluster down
//
// The test itself needs SMOKE_KUBECONFIG, SMOKE_KUBECTL and
// SMOKE_ROLLOUT_IMAGE (an image tag already on every node), SMOKE_MODE
// (the mode the daemon must log) and SMOKE_FAMILY (ipv4, ipv6 or dual: the
// shape the cluster must have), and with a cluster installed from the Helm
// chart SMOKE_HELM and SMOKE_HELM_CHART (the rolling update is then a `helm
// upgrade` to the second tag); without SMOKE_KUBECONFIG it skips. The
// families come from the nodes' pod CIDRs: on a dual-stack cluster the
// Service is dual-stack and every check (cluster IP, DNS A and AAAA records
// from every DNS Service address, NodePort, the rolling update) is made in
// both families.
package node
