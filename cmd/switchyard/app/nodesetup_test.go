package app

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/conntrack"
	"github.com/switchyard-proxy/switchyard/internal/sysctl"
)

func TestLocalhostNodePorts(t *testing.T) {
	v4 := func(s ...string) []netip.Prefix {
		var out []netip.Prefix
		for _, p := range s {
			out = append(out, netip.MustParsePrefix(p))
		}
		return out
	}
	for _, tc := range []struct {
		name string
		edit func(o *Options)
		want bool
	}{
		{"iptables default", func(*Options) {}, true},
		{"disabled", func(o *Options) { o.LocalhostNodePorts = false }, false},
		{"nftables never", func(o *Options) { o.Mode = ModeNFTables }, false},
		{"ipvs never", func(o *Options) { o.Mode = ModeIPVS }, false},
		{"userspace never", func(o *Options) { o.Mode = ModeUserspace }, false},
		{"loopback listed", func(o *Options) { o.NodePortAddresses = v4("10.0.0.0/8", "127.0.0.0/8") }, true},
		{"loopback not listed", func(o *Options) { o.NodePortAddresses = v4("10.0.0.0/8") }, false},
		{"only IPv6 listed: IPv4 takes all", func(o *Options) { o.NodePortAddresses = v4("fd00::/8") }, true},
		{"primary", func(o *Options) { o.NodePortPrimary = true }, false},
		{"IPv6 single stack", func(o *Options) { o.Families = []v1.IPFamily{v1.IPv6Protocol} }, false},
		{"IPv6 primary, dual-stack", func(o *Options) { o.Families = []v1.IPFamily{v1.IPv6Protocol, v1.IPv4Protocol} }, true},
	} {
		o := defaultOptions()
		o.Families = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
		tc.edit(o)
		if got := localhostNodePorts(o); got != tc.want {
			t.Errorf("%s: localhostNodePorts = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// freshNamespace is what a new network namespace reads on a 6.x kernel,
// with the machine-wide nf_conntrack_max read-only in it.
func freshNamespace() (*sysctl.Fake, *sysctl.Fake) {
	proc := sysctl.NewFake(map[string]int{
		"net/netfilter/nf_conntrack_max": 262144, "net/netfilter/nf_conntrack_tcp_timeout_established": 432000,
		"net/netfilter/nf_conntrack_tcp_timeout_close_wait": 60, "net/netfilter/nf_conntrack_tcp_be_liberal": 0,
		"net/netfilter/nf_conntrack_udp_timeout": 30, "net/netfilter/nf_conntrack_udp_timeout_stream": 120,
		sysctlRouteLocalnet: 0,
	})
	proc.ReadOnly["net/netfilter/nf_conntrack_max"] = true
	return proc, sysctl.NewFake(map[string]int{"hashsize": 262144})
}

// loadedAlready is the module loader of a node where nf_conntrack is
// loaded: it must not be called.
func loadedAlready(t *testing.T) func() error {
	return func() error {
		t.Error("nf_conntrack loader called while the module was loaded")
		return nil
	}
}

// TestSetupNodeLoadsConntrack: on a node where nf_conntrack is not loaded
// (no conntrack sysctls at all) the loader runs before the tuning, and the
// tuning goes on once the sysctls appear; kube-proxy fails there.
func TestSetupNodeLoadsConntrack(t *testing.T) {
	o := defaultOptions()
	loaded, module := freshNamespace()
	proc := sysctl.NewFake(map[string]int{sysctlRouteLocalnet: 0})
	calls := 0
	load := func() error {
		calls++
		for k, v := range loaded.Values {
			proc.Values[k] = v
		}
		return nil
	}
	if err := setupNode(o, proc, module, load); err != nil {
		t.Fatal(err)
	}
	if calls != 1 || proc.Values["net/netfilter/nf_conntrack_tcp_timeout_close_wait"] != 3600 {
		t.Errorf("loader calls = %d, close_wait = %d; want 1 and 3600", calls, proc.Values["net/netfilter/nf_conntrack_tcp_timeout_close_wait"])
	}

	// A loader that fails, or one after which the sysctls are still
	// missing, stops the daemon with a hint.
	for name, load := range map[string]func() error{
		"fails":     func() error { return errors.New("EPERM") },
		"no effect": func() error { return nil },
	} {
		proc := sysctl.NewFake(map[string]int{sysctlRouteLocalnet: 0})
		err := setupNode(o, proc, module, load)
		if err == nil || !strings.Contains(err.Error(), "modprobe nf_conntrack") {
			t.Errorf("loader %s: err = %v, want the modprobe hint", name, err)
		}
	}

	// Without any conntrack tuning nothing needs the module.
	o.Conntrack = conntrack.Tuning{}
	o.LocalhostNodePorts = false
	if err := setupNode(o, sysctl.NewFake(nil), module, loadedAlready(t)); err != nil {
		t.Errorf("no tuning: %v", err)
	}
}

func TestSetupNodeDefaults(t *testing.T) {
	o := defaultOptions()
	o.Families = []v1.IPFamily{v1.IPv4Protocol}
	proc, module := freshNamespace()
	if err := setupNode(o, proc, module, loadedAlready(t)); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"net/netfilter/nf_conntrack_tcp_timeout_established=86400",
		"net/netfilter/nf_conntrack_tcp_timeout_close_wait=3600",
		sysctlRouteLocalnet + "=1",
	}
	if !slices.Equal(proc.Writes, want) || len(module.Writes) != 0 {
		t.Errorf("writes = %v %v, want %v and none to the module", proc.Writes, module.Writes, want)
	}
}

func TestSetupNodeNFTablesLeavesRouteLocalnet(t *testing.T) {
	o := defaultOptions()
	o.Mode = ModeNFTables
	o.Conntrack = conntrack.Tuning{}
	proc, module := freshNamespace()
	if err := setupNode(o, proc, module, loadedAlready(t)); err != nil {
		t.Fatal(err)
	}
	if len(proc.Writes) != 0 {
		t.Errorf("writes = %v, want none", proc.Writes)
	}
}

func TestSetupNodeErrors(t *testing.T) {
	o := defaultOptions()
	o.Families = []v1.IPFamily{v1.IPv4Protocol}
	proc, module := freshNamespace()
	proc.ReadOnly["net/netfilter/nf_conntrack_tcp_timeout_close_wait"] = true
	err := setupNode(o, proc, module, loadedAlready(t))
	if err == nil || !strings.HasPrefix(err.Error(), "could not set conntrack parameters from kube-proxy configuration: setting net/netfilter/nf_conntrack_tcp_timeout_close_wait to 3600") {
		t.Fatalf("read-only close-wait: %v", err)
	}
	o.Conntrack = conntrack.Tuning{TCPCloseWaitTimeout: time.Hour}
	proc, module = freshNamespace()
	proc.ReadOnly[sysctlRouteLocalnet] = true
	if err := setupNode(o, proc, module, loadedAlready(t)); err == nil || !strings.Contains(err.Error(), "--iptables-localhost-nodeports=false") {
		t.Fatalf("read-only route_localnet: %v", err)
	}
}
