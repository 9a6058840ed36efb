// Package app holds switchyard's command line: the kube-proxy compatible
// flags, the optional KubeProxyConfiguration file (--config), their merge and
// validation into typed Options, and the cobra command that hands those
// Options to the daemon's run function.
//
// Precedence is defaults < config file < flags given on the command line.
// As upstream kube-proxy does, a zero value in the file (for example
// `syncPeriod: 0s` or `mode: ""`, which kubeadm writes) means "use the
// default". Every value is parsed and checked before the run function is
// called, so nothing touches the kernel with a bad configuration.
package app
