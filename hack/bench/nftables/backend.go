package main

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"time"

	"github.com/switchyard-proxy/switchyard/backends/iptables"
	"github.com/switchyard-proxy/switchyard/backends/nftables"
	"github.com/switchyard-proxy/switchyard/cmd/switchyard/app"
	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
	"github.com/switchyard-proxy/switchyard/proxier"
	"github.com/switchyard-proxy/switchyard/proxier/metrics"
)

// Backends the harness can drive, named "<proxy mode>" or
// "iptables-<iptables backend>".
const (
	backendNFTables       = "nftables"
	backendIPTablesNFT    = "iptables-nft"
	backendIPTablesLegacy = "iptables-legacy"
)

// newBackend builds the backend as cmd/switchyard/app does for its mode,
// with the iptables flavour forced (the daemon detects it).
func newBackend(kind string, m *metrics.Metrics) (proxier.Backend, error) {
	pods := []netip.Prefix{netip.MustParsePrefix(podCIDR)}
	switch kind {
	case backendNFTables:
		return nftables.New(nftables.Config{LocalDetector: proxier.DetectByClusterCIDRs(pods...), Conn: nftables.NewNetlinkConn()})
	case backendIPTablesNFT, backendIPTablesLegacy:
		mode := runner.ModeNFT
		if kind == backendIPTablesLegacy {
			mode = runner.ModeLegacy
		}
		r, err := runner.New(runner.Options{Mode: mode})
		if err != nil {
			return nil, err
		}
		return iptables.New(iptables.Config{LocalDetector: proxier.DetectByClusterCIDRs(pods...), Runner: r, Metrics: m})
	}
	return nil, fmt.Errorf("unknown backend %q", kind)
}

// daemonPeriods are the min-sync and sync periods switchyard runs with
// when started with no flags but the mode: the very command line parsing
// of cmd/switchyard/app, so the figures follow its defaults.
func daemonPeriods(kind string) (minSync, maxSync time.Duration, err error) {
	mode := "iptables"
	if kind == backendNFTables {
		mode = "nftables"
	}
	var opts *app.Options
	cmd := app.NewCommand(func(_ context.Context, o *app.Options) error { opts = o; return nil })
	cmd.SetArgs([]string{"--proxy-mode=" + mode, "--hostname-override=" + nodeName})
	cmd.SetOut(io.Discard)
	if err := cmd.Execute(); err != nil {
		return 0, 0, fmt.Errorf("daemon defaults: %w", err)
	}
	minSync, maxSync = opts.SyncPeriods()
	return minSync, maxSync, nil
}
