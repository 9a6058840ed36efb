package conntrack

import (
	"fmt"
	"time"

	"k8s.io/klog/v2"

	"github.com/switchyard-proxy/switchyard/internal/sysctl"
)

// Tuning is kube-proxy's conntrack configuration (KubeProxyConntrackConfiguration).
// Zero values leave the kernel's setting alone.
type Tuning struct {
	// MaxPerCore scales nf_conntrack_max with the CPU count; 0 leaves
	// nf_conntrack_max (and Min) alone.
	MaxPerCore int
	// Min is the floor of the scaled maximum.
	Min int
	// TCPEstablishedTimeout and TCPCloseWaitTimeout are the idle timeouts
	// of TCP entries in those states.
	TCPEstablishedTimeout time.Duration
	TCPCloseWaitTimeout   time.Duration
	// TCPBeLiberal sets nf_conntrack_tcp_be_liberal=1: out-of-window
	// packets are no longer marked INVALID.
	TCPBeLiberal bool
	// UDPTimeout and UDPStreamTimeout are the idle timeouts of unreplied
	// and of assured UDP entries.
	UDPTimeout       time.Duration
	UDPStreamTimeout time.Duration
}

// maxLimit caps the scaled maximum, as kube-proxy does.
const maxLimit = 1048576

// The names Tune writes, relative to sysctl.Proc and sysctl.ConntrackModule.
const (
	sysctlMax            = "net/netfilter/nf_conntrack_max"
	sysctlEstablished    = "net/netfilter/nf_conntrack_tcp_timeout_established"
	sysctlCloseWait      = "net/netfilter/nf_conntrack_tcp_timeout_close_wait"
	sysctlBeLiberal      = "net/netfilter/nf_conntrack_tcp_be_liberal"
	sysctlUDPTimeout     = "net/netfilter/nf_conntrack_udp_timeout"
	sysctlUDPStream      = "net/netfilter/nf_conntrack_udp_timeout_stream"
	moduleParamHashsize  = "hashsize"
	hashsizePerMaxFactor = 4
)

// Max is the nf_conntrack_max the tuning asks for on a machine with numCPU
// CPUs: MaxPerCore × numCPU, at least Min, at most 1048576; 0 when
// MaxPerCore is 0.
func (t Tuning) Max(numCPU int) int {
	if t.MaxPerCore <= 0 {
		return 0
	}
	scaled := t.MaxPerCore * numCPU
	switch {
	case scaled > maxLimit:
		return maxLimit
	case scaled > t.Min:
		return scaled
	}
	return t.Min
}

// Tune writes the tuning: procSys is /proc/sys of the daemon's network
// namespace, module nf_conntrack's parameters. nf_conntrack_max is raised,
// never lowered, and the hash size raised to a quarter of it when smaller
// (both are machine-wide: a lower value set by the operator's node
// configuration is theirs to keep). Values that already hold are not
// written, so a restart under a read-only /proc/sys succeeds once they
// were set (by --init-only, say). A failed write is returned naming the
// parameter; kube-proxy refuses to start then, and so does switchyard.
func Tune(t Tuning, numCPU int, procSys, module sysctl.Interface) error {
	if err := raiseMax(t.Max(numCPU), procSys, module); err != nil {
		return err
	}
	for _, s := range []struct {
		name  string
		value int
	}{
		{sysctlEstablished, seconds(t.TCPEstablishedTimeout)},
		{sysctlCloseWait, seconds(t.TCPCloseWaitTimeout)},
		{sysctlBeLiberal, boolInt(t.TCPBeLiberal)},
		{sysctlUDPTimeout, seconds(t.UDPTimeout)},
		{sysctlUDPStream, seconds(t.UDPStreamTimeout)},
	} {
		if s.value <= 0 {
			continue
		}
		if err := ensure(procSys, s.name, s.value); err != nil {
			return err
		}
	}
	return nil
}

func raiseMax(want int, procSys, module sysctl.Interface) error {
	if want <= 0 {
		return nil
	}
	cur, err := procSys.Get(sysctlMax)
	if err != nil {
		return fmt.Errorf("reading %s: %w", sysctlMax, err)
	}
	if cur < want {
		if err := ensure(procSys, sysctlMax, want); err != nil {
			return err
		}
	} else {
		klog.V(2).InfoS("Keeping nf_conntrack_max", "current", cur, "wanted", want)
	}
	hashsize, err := module.Get(moduleParamHashsize)
	if err != nil {
		return fmt.Errorf("reading nf_conntrack hashsize: %w", err)
	}
	wantHash := want / hashsizePerMaxFactor
	if hashsize >= wantHash {
		return nil
	}
	klog.InfoS("Setting conntrack hashsize", "conntrackHashsize", wantHash)
	if err := module.Set(moduleParamHashsize, wantHash); err != nil {
		return fmt.Errorf("setting nf_conntrack hashsize to %d: %w", wantHash, err)
	}
	return nil
}

func ensure(s sysctl.Interface, name string, value int) error {
	wrote, err := sysctl.Ensure(s, name, value)
	if err != nil {
		return fmt.Errorf("setting %s to %d: %w", name, value, err)
	}
	if wrote {
		klog.InfoS("Set sysctl", "entry", name, "value", value)
	}
	return nil
}

func seconds(d time.Duration) int { return int(d / time.Second) }

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
