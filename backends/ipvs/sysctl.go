package ipvs

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/moby/ipvs"
	"k8s.io/klog/v2"
)

// sysctl is one kernel parameter the backend sets.
type sysctl struct{ name, value string }

// kernelSettings are the parameters kube-proxy's IPVS mode sets:
//   - vs/conntrack=1: IPVS keeps conntrack entries, so iptables SNAT
//     (masquerade) works on IPVS traffic;
//   - vs/expire_nodest_conn=1: drop connections whose real server is gone
//     at their next packet instead of black-holing them;
//   - vs/expire_quiescent_template=1: persistence templates of weight-0
//     servers expire, so affinity does not pin clients to them;
//   - vs/conn_reuse_mode=0 on kernels before 5.9, whose mode 1 stalls
//     reused ports for a second (kube-proxy issue 81775); later kernels
//     fixed it and keep their default;
//   - ip_forward=1: traffic to remote endpoints is routed;
//   - with StrictARP, arp_ignore=1 and arp_announce=2 so the node neither
//     answers nor announces ARP for the addresses on kube-ipvs0.
func kernelSettings(c *Config) ([]sysctl, error) {
	s := []sysctl{
		{"net/ipv4/vs/conntrack", "1"},
		{"net/ipv4/vs/expire_nodest_conn", "1"},
		{"net/ipv4/vs/expire_quiescent_template", "1"},
		{"net/ipv4/ip_forward", "1"},
	}
	release, err := c.Sysctl.Get("kernel/osrelease")
	if err != nil {
		return nil, fmt.Errorf("read kernel version: %w", err)
	}
	if olderThan(release, 5, 9) {
		s = append(s, sysctl{"net/ipv4/vs/conn_reuse_mode", "0"})
	}
	if c.StrictARP {
		s = append(s, sysctl{"net/ipv4/conf/all/arp_ignore", "1"}, sysctl{"net/ipv4/conf/all/arp_announce", "2"})
	}
	return s, nil
}

// olderThan compares a kernel release ("6.1.0-56-cloud-amd64") with
// major.minor; an unreadable release counts as new.
func olderThan(release string, major, minor int) bool {
	parts := strings.SplitN(release, ".", 3)
	if len(parts) < 2 {
		return false
	}
	maj, err1 := strconv.Atoi(parts[0])
	min, err2 := strconv.Atoi(strings.TrimRightFunc(parts[1], func(r rune) bool { return r < '0' || r > '9' }))
	if err1 != nil || err2 != nil {
		return false
	}
	return maj < major || (maj == major && min < minor)
}

// setupKernel applies the sysctls and the IPVS timeouts. A sync runs it
// on full syncs until it succeeded once.
func setupKernel(c *Config) error {
	settings, err := kernelSettings(c)
	if err != nil {
		return err
	}
	for _, s := range settings {
		cur, err := c.Sysctl.Get(s.name)
		if err != nil {
			return fmt.Errorf("sysctl %s: %w", s.name, err)
		}
		if cur == s.value {
			continue
		}
		if err := c.Sysctl.Set(s.name, s.value); err != nil {
			return fmt.Errorf("sysctl %s=%s: %w", s.name, s.value, err)
		}
		klog.V(2).InfoS("Set sysctl", "name", s.name, "from", cur, "to", s.value)
	}
	if c.TCPTimeout > 0 || c.TCPFinTimeout > 0 || c.UDPTimeout > 0 {
		err := c.IPVS.SetConfig(&ipvs.Config{TimeoutTCP: c.TCPTimeout, TimeoutTCPFin: c.TCPFinTimeout, TimeoutUDP: c.UDPTimeout})
		if err != nil {
			return fmt.Errorf("set IPVS timeouts: %w", err)
		}
	}
	return nil
}
