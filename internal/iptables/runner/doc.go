// Package runner runs iptables for switchyard's backends.
//
// Interface is the narrow seam every backend programs against; New returns
// the real implementation and internal/iptables/iptablestest a strict stateful fake of it. Usage:
//
//	r, err := runner.New(runner.Options{}) // detects nf_tables vs legacy
//	err = r.Restore(ctx, runner.IPv4, []byte("*nat\n:KUBE-SERVICES - [0:0]\n...\nCOMMIT\n"))
//	if lines := runner.OffendingLines(data, err); lines != nil {
//		klog.ErrorS(err, "iptables-restore failed", "lines", lines)
//	}
//	existed, err := r.EnsureChain(runner.IPv4, "nat", "KUBE-SERVICES")
//	_, err = r.EnsureRule(runner.IPv4, runner.Prepend, "nat", "PREROUTING",
//		"-m", "comment", "--comment", "kubernetes service portals", "-j", "KUBE-SERVICES")
//
// Restore and SaveTable exec iptables-restore / iptables-save (args only, no
// shell; the payload goes on stdin). The single-rule and chain operations go
// through github.com/coreos/go-iptables. Both use the binaries of one mode:
// iptables-nft-* or iptables-legacy-* when installed, chosen the way
// kubernetes-sigs/iptables-wrappers does (kubelet's hint chains first, then
// whichever backend holds more rules), else the plain binaries, whose mode
// `iptables --version` reports.
//
// Lock contention: legacy iptables serialises writers on /run/xtables.lock.
// Every command waits for it at most Options.WaitSeconds (default 5 s; with
// iptables 1.6.2..1.8.7 the restore polls every 100 ms, newer releases poll
// on their own), then fails; the sync runner retries. nf_tables needs no
// lock: the kernel serialises transactions.
//
// With Options.Netns every command runs inside that named network namespace
// (/run/netns/NAME) from a dedicated OS thread that is discarded afterwards;
// tests use it to program a throwaway namespace, never the host's.
package runner
