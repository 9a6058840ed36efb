package framework

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Addresses the daemon binds inside the node namespace by default.
const (
	DaemonHealthzAddr = "127.0.0.1:10256"
	DaemonMetricsAddr = "127.0.0.1:10249"
)

// Daemon is a switchyard process running in a node namespace.
type Daemon struct {
	*Process
	NS          string
	HealthzAddr string
	MetricsAddr string
}

// DefaultDaemonArgs are the flags StartDaemon passes before the caller's own
// (a later occurrence of a flag wins).
func DefaultDaemonArgs(kubeconfig, nodeName string) []string {
	return []string{
		"--kubeconfig=" + kubeconfig,
		"--hostname-override=" + nodeName,
		"--proxy-mode=iptables",
		"--cluster-cidr=" + DefaultClusterCIDR,
		"--metrics-bind-address=" + DaemonMetricsAddr,
		"--healthz-bind-address=" + DaemonHealthzAddr,
		// nf_conntrack_max and the hash size are machine-wide: a test
		// never changes them (the per-namespace timeouts it may).
		"--conntrack-max-per-core=0",
		"--v=2",
	}
}

// StartDaemonIn runs bin with args inside namespace ns and stops it in
// t.Cleanup. It does not wait for health: use WaitHealthy.
func StartDaemonIn(t testing.TB, bin, ns string, args ...string) *Daemon {
	t.Helper()
	d := &Daemon{
		NS:          ns,
		HealthzAddr: lastFlagValue(args, "healthz-bind-address", DaemonHealthzAddr),
		MetricsAddr: lastFlagValue(args, "metrics-bind-address", DaemonMetricsAddr),
	}
	d.Process = StartInNetns(t, "switchyard-"+ns, ns, append([]string{bin}, args...)...)
	return d
}

// lastFlagValue returns the value of the last --name=value or --name value
// in args, or def.
func lastFlagValue(args []string, name, def string) string {
	v := def
	for i, a := range args {
		a = "--" + strings.TrimLeft(a, "-")
		if val, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			v = val
		} else if a == "--"+name && i+1 < len(args) {
			v = args[i+1]
		}
	}
	return v
}

// Get fetches http://addr/path from inside the daemon's namespace.
func (d *Daemon) Get(ctx context.Context, addr, path string) (int, string, error) {
	return httpGetIn(ctx, d.NS, "http://"+addr+path)
}

// WaitHealthy waits until /healthz answers 200, failing early if the daemon
// exits.
func (d *Daemon) WaitHealthy(timeout time.Duration) error {
	return WaitFor(timeout, func() (bool, error) {
		if err := exitError(d.Process); err != nil {
			return false, err
		}
		code, body, err := d.Get(context.Background(), d.HealthzAddr, "/healthz")
		if err != nil {
			return false, err
		}
		if code != http.StatusOK {
			return false, fmt.Errorf("/healthz: %d %s", code, body)
		}
		return true, nil
	})
}

// Metrics returns the daemon's /metrics text.
func (d *Daemon) Metrics(ctx context.Context) (string, error) {
	code, body, err := d.Get(ctx, d.MetricsAddr, "/metrics")
	if err != nil {
		return "", err
	}
	if code != http.StatusOK {
		return "", fmt.Errorf("/metrics: HTTP %d", code)
	}
	return body, nil
}

// httpGetIn performs one GET from inside namespace ns.
func httpGetIn(ctx context.Context, ns, url string) (int, string, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, defaultRequestTimeout)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", fmt.Errorf("request %s: %w", url, err)
	}
	resp, err := HTTPClient(ns).Do(req)
	if err != nil {
		return 0, "", fmt.Errorf("GET %s in %s: %w", url, ns, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, "", fmt.Errorf("read %s: %w", url, err)
	}
	return resp.StatusCode, string(b), nil
}
