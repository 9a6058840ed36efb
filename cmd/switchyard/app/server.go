package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/switchyard-proxy/switchyard/backends/userspace"
	"github.com/switchyard-proxy/switchyard/internal/kubeapi"
	"github.com/switchyard-proxy/switchyard/internal/restmetrics"
	"github.com/switchyard-proxy/switchyard/proxier"
	"github.com/switchyard-proxy/switchyard/proxier/healthcheck"
	"github.com/switchyard-proxy/switchyard/proxier/metrics"
)

// Run is the daemon: it builds the backend for the chosen mode, connects
// to the API server and runs the proxier until ctx ends. With --cleanup it
// removes every mode's kernel state instead and returns.
func Run(ctx context.Context, o *Options) error {
	if o.Cleanup {
		return cleanupAll(ctx, o)
	}
	if o.CleanupAfterRollback {
		return cleanupAfterRollback(ctx, o)
	}
	if o.InitOnly {
		return initOnly(o)
	}
	applyOOMScoreAdj(o.OOMScoreAdj)
	nodeName, err := nodeName(o)
	if err != nil {
		return err
	}
	restmetrics.Install() // before the client: kube-proxy's rest_client_* families
	client, err := newClient(o)
	if err != nil {
		return err
	}
	go recordStart(ctx, client, nodeName)
	if err := nodeFamilies(ctx, o, client, nodeName); err != nil {
		return err
	}
	if err := setupThisNode(o); err != nil {
		return err
	}
	reg, m := newMetrics(o)
	backend, err := newBackend(o, m, reg)
	if err != nil {
		return fmt.Errorf("setting up %s mode: %w", o.Mode, err)
	}
	if c, ok := backend.(io.Closer); ok {
		// The userspace proxy's sockets close with the daemon; kernel
		// state (rules, IPVS) stays for the next start.
		defer c.Close()
	}
	// The hooks see the mode's own backend (its relays), not the wrapper.
	hooks, err := postSyncHooks(o, m, reg, backend)
	if err != nil {
		return err
	}
	relays := relayTableOf(backend)
	backend = newFullSyncGC(backend)
	health := newProxierHealth(o, m)
	svcHealth := healthcheck.NewServiceHealthServer(healthcheck.ServiceHealthConfig{
		NodeAddresses: nil, Proxier: health,
	})
	defer svcHealth.Close()
	p := newNodeProxier(o, client, nodeName, backend, m, health, svcHealth, hooks...)
	klog.InfoS("Starting switchyard", "version", Version, "mode", o.Mode, "node", nodeName)
	return runAll(ctx, o, serverHandlers{reg: reg, relays: relays}, health, p)
}

// newProxierHealth is the /healthz and /livez state of one node's proxier.
func newProxierHealth(o *Options, m *metrics.Metrics) *healthcheck.ProxierHealthServer {
	_, maxSync := o.SyncPeriods()
	return healthcheck.NewProxierHealthServer(healthcheck.ProxierHealthConfig{
		HealthTimeout: 2 * maxSync, Metrics: m,
	})
}

// newNodeProxier wires one node's proxier from the options: the daemon's,
// and each of `switchyard hollow`'s. svcHealth may be nil.
func newNodeProxier(o *Options, client kubeapi.Client, nodeName string, backend proxier.Backend, m *metrics.Metrics,
	health *healthcheck.ProxierHealthServer, svcHealth proxier.ServiceHealth, hooks ...proxier.PostSyncHook) *proxier.Proxier {
	minSync, maxSync := o.SyncPeriods()
	return proxier.New(client, backend, proxier.Config{
		NodeName: nodeName, ServiceProxyName: o.ServiceProxyName,
		MinSyncPeriod: minSync, SyncPeriod: maxSync, Family: o.PrimaryFamily, Families: o.Families,
	}, m, health, svcHealth, hooks...)
}

// serverHandlers is what the metrics server serves besides the mode.
type serverHandlers struct {
	reg *prometheus.Registry
	// relays is the userspace proxy's relay table; nil in other modes.
	relays func() userspace.RelayTable
}

// relayTableOf is the backend's relay table, when it relays (userspace).
func relayTableOf(b proxier.Backend) func() userspace.RelayTable {
	if r, ok := b.(interface{ RelayTable() userspace.RelayTable }); ok {
		return r.RelayTable
	}
	return nil
}

// newMetrics registers every metric, with the series of the families the
// daemon serves present from the start.
func newMetrics(o *Options) (*prometheus.Registry, *metrics.Metrics) {
	reg := metrics.NewRegistry()
	// client-go's request metrics, counted since the client was built.
	reg.MustRegister(restmetrics.Collectors()...)
	m := metrics.New(reg)
	m.InitFamilies(o.Families...)
	return reg, m
}

// runAll runs the proxier and the metrics and health servers; the first
// to fail stops the others.
func runAll(ctx context.Context, o *Options, srv serverHandlers, health *healthcheck.ProxierHealthServer, p *proxier.Proxier) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	errs := make(chan error, 3)
	run := func(name string, f func(context.Context) error) {
		go func() {
			err := f(ctx)
			if err != nil && !errors.Is(err, context.Canceled) {
				err = fmt.Errorf("%s: %w", name, err)
				cancel(err)
			}
			errs <- err
		}()
	}
	n := 1
	run("proxier", p.Run)
	if o.HealthzBindAddress != "" {
		n++
		run("healthz server", retryServer("healthz", o.BindAddressHardFail, func(ctx context.Context) error {
			return health.Run(ctx, o.HealthzBindAddress)
		}))
	}
	if o.MetricsBindAddress != "" {
		n++
		run("metrics server", retryServer("metrics", o.BindAddressHardFail, func(ctx context.Context) error {
			return serveMetrics(ctx, o, srv)
		}))
	}
	var first error
	for range n {
		if err := <-errs; err != nil && first == nil && !errors.Is(err, context.Canceled) {
			first = err
		}
		cancel(nil)
	}
	klog.InfoS("Stopped; the dataplane is left in place")
	return first
}

// serverRetryInterval is how long a failed server waits before it tries
// again (kube-proxy's 5 s).
const serverRetryInterval = 5 * time.Second

// retryServer wraps a server's run function. Without
// --bind-address-hard-fail a failure (the port is taken, say) is logged and
// retried every 5 s, as kube-proxy does, so a daemon started while the old
// proxy still holds the port keeps proxying instead of crash-looping; with
// it, the failure ends the daemon.
func retryServer(name string, hardFail bool, serve func(context.Context) error) func(context.Context) error {
	return func(ctx context.Context) error {
		for {
			err := serve(ctx)
			if err == nil || ctx.Err() != nil {
				return nil
			}
			if hardFail {
				return err
			}
			klog.ErrorS(err, "Server failed; retrying", "server", name, "after", serverRetryInterval)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(serverRetryInterval):
			}
		}
	}
}

// serveMetrics serves metricsMux on the metrics address.
func serveMetrics(ctx context.Context, o *Options, h serverHandlers) error {
	mux := metricsMux(o, h)
	l, err := net.Listen("tcp", o.MetricsBindAddress)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// metricsMux serves /metrics, and /proxyMode as kube-proxy does,
// /debug/pprof/ when profiling is enabled, and in userspace mode the
// relay table `switchyard explain` reads (read only, like /proxyMode).
func metricsMux(o *Options, h serverHandlers) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/metrics", metrics.Handler(h.reg))
	if h.relays != nil {
		mux.Handle(userspace.RelayTablePath, userspace.RelayTableHandler(h.relays))
	}
	mux.HandleFunc("/proxyMode", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprint(w, string(o.Mode))
	})
	if o.EnableProfiling {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return mux
}

// newClient uses the kubeconfig/master when given, in-cluster config
// otherwise (the DaemonSet case).
func newClient(o *Options) (kubeapi.Client, error) {
	cfg, err := restConfig(o)
	if err != nil {
		return nil, err
	}
	return kubeapi.New(cfg)
}

// restConfig is the API client's configuration from the options.
func restConfig(o *Options) (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	if o.Kubeconfig == "" && o.Master == "" {
		cfg, err = rest.InClusterConfig()
	} else {
		cfg, err = clientcmd.BuildConfigFromFlags(o.Master, o.Kubeconfig)
	}
	if err != nil {
		return nil, fmt.Errorf("building API client configuration: %w", err)
	}
	cfg.UserAgent = "switchyard/" + Version
	cfg.QPS, cfg.Burst = o.KubeAPIQPS, o.KubeAPIBurst
	if o.KubeAPIContentType != "" {
		cfg.ContentType = o.KubeAPIContentType
	}
	cfg.AcceptContentTypes = o.KubeAPIAcceptContentTypes
	return cfg, nil
}

func nodeName(o *Options) (string, error) {
	if o.HostnameOverride != "" {
		return o.HostnameOverride, nil
	}
	h, err := os.Hostname()
	if err != nil {
		return "", fmt.Errorf("reading hostname (set --hostname-override): %w", err)
	}
	return strings.ToLower(strings.TrimSpace(h)), nil
}

// recordStart records the "Starting" Event on the node, as kube-proxy does
// (`kubectl get events` shows each proxy's start). It never holds up the
// start; a failure (an older ClusterRole without events create) is logged.
func recordStart(ctx context.Context, client kubeapi.Client, nodeName string) {
	sink, ok := client.(kubeapi.EventSink)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ev := kubeapi.NodeEvent(nodeName, "switchyard", v1.EventTypeNormal, "Starting", "StartKubeProxy", "", time.Now())
	if err := sink.CreateEvent(ctx, ev); err != nil {
		klog.InfoS("Could not record the Starting event", "node", nodeName, "err", err)
	}
}
