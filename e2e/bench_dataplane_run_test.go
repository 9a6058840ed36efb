//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/e2e/framework"
)

// dpResult is one run of the load generator (hack/bench/dataplane).
type dpResult struct {
	Workload    string  `json:"workload"`
	Ops         int64   `json:"ops"`
	Errors      int64   `json:"errors"`
	Rate        float64 `json:"rate"`
	ConnectP50  float64 `json:"connect_p50_us"`
	ConnectP99  float64 `json:"connect_p99_us"`
	KernelPerOp float64 `json:"kernel_us_per_op"`
	BusyPerOp   float64 `json:"busy_us_per_op"`
}

// dpSample is one measurement of one path.
type dpSample struct {
	n             int
	mode, proxy   string
	via, workload string
	round         int
	res           dpResult
	err           error
}

// dpMeasure runs cfg.rounds rounds; in each, every via and workload is
// measured on every path in turn, the paths' order rotating by round.
func dpMeasure(t *testing.T, cfg dpConfig, paths []*dpPath, shared *corev1.Service, n int) []dpSample {
	t.Helper()
	var out []dpSample
	for r := range cfg.rounds {
		for _, via := range cfg.vias {
			for _, w := range cfg.workloads {
				for i := range paths {
					p := paths[(i+r)%len(paths)]
					if p.proxy == "none" && via == "local" || p.skipped {
						continue // direct: its figure is nodeport's
					}
					s := dpSample{n: n, mode: p.mode, proxy: p.proxy, via: via, workload: w, round: r}
					s.res, s.err = dpRun(t.Context(), cfg, p, shared, via, w)
					if s.err != nil {
						t.Logf("n=%d %s %s %s round %d: %v", n, p.label(), via, w, r, s.err)
					}
					out = append(out, s)
				}
			}
		}
		t.Logf("n=%d: round %d of %d done", n, r+1, cfg.rounds)
	}
	return out
}

// dpRun runs one workload from the via's client namespace, the client
// pinned to the CPU the servers do not use.
func dpRun(ctx context.Context, cfg dpConfig, p *dpPath, shared *corev1.Service, via, workload string) (dpResult, error) {
	ns, addrs := dpTarget(p, shared, via, workload)
	ctx, cancel := context.WithTimeout(ctx, cfg.duration+time.Minute)
	defer cancel()
	argv := []string{"ip", "netns", "exec", ns, "taskset", "-c", dpClientCPU, cfg.bin, workload,
		"-addr", strings.Join(addrs, ","), "-clients", strconv.Itoa(cfg.clients), "-duration", cfg.duration.String()}
	out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		return dpResult{}, fmt.Errorf("%v: %w %s", argv, err, stderr)
	}
	var r dpResult
	if err := json.Unmarshal(out, &r); err != nil {
		return r, fmt.Errorf("load generator output %q: %w", out, err)
	}
	if r.Ops == 0 {
		return r, fmt.Errorf("no successful operation (%d errors)", r.Errors)
	}
	return r, nil
}

// dpTarget is where a workload goes for a path and via: the client
// namespace and the addresses. The direct path goes to the server pods'
// own addresses, from the client pod (clusterip) or the external client
// (nodeport, local).
func dpTarget(p *dpPath, shared *corev1.Service, via, workload string) (string, []string) {
	topo := p.env.Topo
	ns := topo.ClientNS
	if via == "clusterip" {
		ns = topo.Pods[0].NS
	}
	podPort, svcPort, portName := dpRRPort, dpSvcRR, dpPortRR
	switch workload {
	case "stream":
		podPort, svcPort, portName = dpSinkPort, dpSvcSink, dpPortSink
	case "udp":
		podPort, svcPort, portName = dpUDPPort, dpSvcUDP, dpPortUDPNam
	}
	if p.proxy == "none" {
		var addrs []string
		for _, pod := range topo.Pods[1:] {
			addrs = append(addrs, hostPort(pod.IP, int32(podPort)))
		}
		return ns, addrs
	}
	switch via {
	case "clusterip":
		return ns, []string{hostPort(shared.Spec.ClusterIP, int32(svcPort))}
	case "local":
		return ns, []string{hostPort(topo.NodeIP, nodePortOf(p.local, portName))}
	}
	return ns, []string{hostPort(topo.NodeIP, nodePortOf(shared, portName))}
}

// dpIptablesBin is the iptables binary that lists an iptables mode's rules
// of the run's family.
func dpIptablesBin(mode string, v6 bool) string {
	bin := "iptables"
	if v6 {
		bin = "ip6tables"
	}
	if mode == "iptables-legacy" {
		return bin + "-legacy"
	}
	return bin + "-nft"
}

// dpRulePosition is the index in rules (`iptables -S CHAIN`, rules[0] the
// chain's -N line) of the first rule that matches destination ip (a /32,
// or a /128 for IPv6, as iptables -S prints it) and port; 0 if none does.
func dpRulePosition(rules []string, ip string, port int) int {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return 0
	}
	dst := netip.PrefixFrom(a, a.BitLen()).String()
	for i, r := range rules {
		f := strings.Fields(r)
		if slices.Contains(f, dst) && hasPair(f, "--dport", strconv.Itoa(port)) {
			return i
		}
	}
	return 0
}

// hasPair tells whether fields holds name immediately followed by value.
func hasPair(fields []string, name, value string) bool {
	for i := 0; i+1 < len(fields); i++ {
		if fields[i] == name && fields[i+1] == value {
			return true
		}
	}
	return false
}

func nodePortOf(svc *corev1.Service, name string) int32 {
	for _, sp := range svc.Spec.Ports {
		if sp.Name == name {
			return sp.NodePort
		}
	}
	return 0
}

// dpKernelNote says how many Services the path's kernel holds and, for
// the iptables modes, where the measured ClusterIP's rule is in
// KUBE-SERVICES (the first packet of a connection walks that chain), in the
// run's family: nft's ip or ip6 table, iptables or ip6tables.
func dpKernelNote(t *testing.T, p *dpPath, shared *corev1.Service) string {
	t.Helper()
	ns := p.env.Topo.NodeNS
	v6 := p.env.Topo.Shape == framework.ShapeIPv6
	switch p.mode {
	case "nftables":
		table := "ip"
		if v6 {
			table = "ip6"
		}
		out, err := framework.RunIn(t.Context(), ns, "nft", "list", "map", table, "kube-proxy", "service-ips")
		if err != nil { // no nft in the VM's image
			return fmt.Sprintf("nft list map: %v", err)
		}
		return fmt.Sprintf("service-ips holds %d elements", strings.Count(out, "goto "))
	case "iptables", "iptables-legacy":
		bin := dpIptablesBin(p.mode, v6)
		out, _ := framework.RunIn(t.Context(), ns, bin, "-t", "nat", "-S", "KUBE-SERVICES")
		rules := strings.Split(strings.TrimSpace(out), "\n")
		pos := dpRulePosition(rules, shared.Spec.ClusterIP, dpSvcRR)
		return fmt.Sprintf("KUBE-SERVICES (%s) has %d rules; %s's ClusterIP rule is rule %d", bin, len(rules)-1, shared.Name, pos)
	case "ipvs":
		out, err := framework.RunIn(t.Context(), ns, "ipvsadm", "-Ln")
		if err != nil {
			return fmt.Sprintf("ipvsadm -Ln: %v", err)
		}
		vss, err := framework.ParseIPVSList(out)
		if err != nil {
			return err.Error()
		}
		key := "TCP " + hostPort(shared.Spec.ClusterIP, dpSvcRR)
		v, ok := framework.FindIPVS(vss, key)
		return fmt.Sprintf("IPVS holds %d virtual servers; %s: listed %v, %d real servers", len(vss), key, ok, len(v.Reals))
	}
	return ""
}
