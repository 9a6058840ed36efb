//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/switchyard-proxy/switchyard/e2e/framework"
)

// Knobs of TestOutage (`make outage`, hack/outage.sh); it is skipped unless
// SWITCHYARD_OUTAGE_DOWN is set.
const (
	outDownEnv     = "SWITCHYARD_OUTAGE_DOWN"      // "120s 600s": one apiserver outage each
	outServicesEnv = "SWITCHYARD_OUTAGE_SERVICES"  // background Services, 10000
	outChangedEnv  = "SWITCHYARD_OUTAGE_CHANGED"   // Services changed in etcd while it is down, 100
	outModeEnv     = "SWITCHYARD_OUTAGE_MODE"      // both proxies' --proxy-mode, iptables
	outEtcdDownEnv = "SWITCHYARD_OUTAGE_ETCD_DOWN" // how long etcd stays killed, 20s
	outOutEnv      = "SWITCHYARD_OUTAGE_OUT"       // file that also gets the tables and result lines
)

// Shape of the run: the Services traffic goes through (each TCP and UDP),
// how often each prober connects, how often health is read, and how long
// the proxies get to bring a change into the kernel.
const (
	outEchoServices = 3
	outProbeEvery   = 250 * time.Millisecond
	outHealthEvery  = 500 * time.Millisecond
	outCatchUpLimit = 5 * time.Minute
	outBackgroundNS = "outage-bg"
)

// outProxy is one proxy under test: its own topology (node, client and pod
// namespaces), its identity at the apiserver, and what watches it.
type outProxy struct {
	name  string // switchyard, kube-proxy
	user  string // its identity in the audit log
	env   *framework.Env
	d     *framework.Daemon
	loops []*framework.EchoLoop
	// control probes a pod straight (no Service, no proxy) from the same
	// client namespace: when it fails too, the machine stalled, not the
	// proxy.
	control []*framework.EchoLoop
	health  *framework.HealthPoller
}

// outRun is the run's shared state.
type outRun struct {
	priv     *framework.Suite
	etcd     *framework.Etcd
	cs       kubernetes.Interface
	audit    string // the apiserver's audit log
	mode     string
	n        int // background Services
	changed  int // Services changed per outage
	proxies  []*outProxy
	echo     []*corev1.Service
	rounds   int // outages so far: each changes its own Services to its own addresses
	out      *outWriter
	apiUsers []string
}

// TestOutage stops the kube-apiserver for each SWITCHYARD_OUTAGE_DOWN
// while switchyard and upstream kube-proxy (same mode, side by side, each
// on its own node) program N Services, changes Services straight in etcd
// while it is down (as another apiserver would serve them), and starts it
// again. Traffic through existing Services must never fail; it reports the
// time from the apiserver's readiness to every change being in each
// proxy's kernel, each proxy's peak memory over the catch-up, its lists
// (audit log) and what /healthz and /livez said. Then etcd is killed
// under a watching apiserver and the apiserver restarted under the
// proxies: whether their watches resume or they list everything again.
func TestOutage(t *testing.T) {
	downs := envDurations(t, outDownEnv)
	if len(downs) == 0 {
		t.Skipf("set %s (e.g. \"120s\") to run", outDownEnv)
	}
	r := outSetup(t)
	for _, down := range downs {
		r.apiServerOutage(t, down)
	}
	r.etcdKill(t, envDuration(t, outEtcdDownEnv, 20*time.Second))
	r.apiServerRestart(t)
	r.checkProbers(t)
	r.out.flush(t)
}

func envDurations(t *testing.T, name string) []time.Duration {
	t.Helper()
	var out []time.Duration
	for _, f := range strings.Fields(envOr(name, "")) {
		d, err := time.ParseDuration(f)
		if err != nil || d <= 0 {
			t.Fatalf("%s=%q: want positive Go durations", name, envOr(name, ""))
		}
		out = append(out, d)
	}
	return out
}

// outSetup starts a private control plane with an audit log of the
// proxies' lists and watches, seeds the background Services in etcd,
// starts both proxies, waits until traffic flows through each, and starts
// the probers and health pollers.
func outSetup(t *testing.T) *outRun {
	t.Helper()
	r := &outRun{
		mode: envOr(outModeEnv, "iptables"), n: envInt(t, outServicesEnv, 10000),
		changed: envInt(t, outChangedEnv, 100), out: newOutWriter(t),
	}
	if r.changed > r.n {
		t.Fatalf("%s=%d is more than the %d Services", outChangedEnv, r.changed, r.n)
	}
	r.priv = framework.PrivateSuite(t, suite)
	r.cs = outClient(t, r.priv.Cluster.Config)
	r.apiUsers = []string{outUser(framework.DaemonSAName), outUser(framework.KubeProxySAName)}
	r.enableAudit(t)
	var err error
	if r.etcd, err = framework.DialEtcd(r.priv.Cluster.EtcdEndpoint); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.etcd.Close() })
	for i, name := range []string{"switchyard", "kube-proxy"} {
		r.proxies = append(r.proxies, &outProxy{name: name, user: r.apiUsers[i],
			env: framework.Setup(t, r.priv, framework.TopologySpec{Pods: 3})})
	}
	r.seed(t)
	env0 := r.proxies[0].env
	for i := range outEchoServices {
		r.echo = append(r.echo, env0.EchoService(t, fmt.Sprintf("out-%d", i), env0.Topo.Pods...))
	}
	r.startProxies(t)
	return r
}

func outUser(sa string) string {
	return "system:serviceaccount:" + framework.DaemonSANamespace + ":" + sa
}

// outClient is an admin client without client-side rate limiting.
func outClient(t *testing.T, c *rest.Config) kubernetes.Interface {
	t.Helper()
	cfg := *c
	cfg.QPS, cfg.Burst = 2000, 4000
	cs, err := kubernetes.NewForConfig(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// enableAudit restarts the kube-apiserver with an audit log of the
// proxies' lists and watches; later restarts keep it.
func (r *outRun) enableAudit(t *testing.T) {
	t.Helper()
	args, path, err := framework.AuditArgs(t.TempDir(), r.apiUsers...)
	if err != nil {
		t.Fatal(err)
	}
	stopped, err := r.priv.Cluster.StopAPIServer()
	if err != nil {
		t.Fatal(err)
	}
	if err := stopped.WithArgs(args...).Start(t.Context()); err != nil {
		t.Fatalf("restarting kube-apiserver with an audit log: %v", err)
	}
	r.audit = path
}

// seed writes the background Services (one endpoint, one port each) into
// etcd, in a namespace of their own: no Env deletes them one by one at the
// end (the private control plane goes as a whole).
func (r *outRun) seed(t *testing.T) {
	t.Helper()
	start := time.Now()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: outBackgroundNS}}
	if _, err := r.cs.CoreV1().Namespaces().Create(t.Context(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	seeder := &framework.ServiceSeeder{Etcd: r.etcd, Client: r.priv.Cluster.Client}
	node := r.proxies[0].env.Topo.NodeName
	err := seeder.Seed(t.Context(), r.n, func(i int) (*corev1.Service, *discoveryv1.EndpointSlice) {
		return backgroundObjects(outBackgroundNS, node, i, 1, 1)
	})
	if err != nil {
		t.Fatalf("seeding etcd: %v", err)
	}
	if svcs, slices, err := waitCount(t.Context(), r.cs, outBackgroundNS, r.n); err != nil {
		t.Fatalf("after seeding etcd the API lists %d services and %d slices, want %d: %v", svcs, slices, r.n, err)
	}
	t.Logf("%d background services seeded in etcd and listed through the API in %s", r.n, secs(time.Since(start)))
}

// startProxies starts both proxies from an empty kernel, waits for their
// first sync and for every echo Service to answer through each, then
// starts the probers (TCP and UDP to every echo Service, from each proxy's
// client namespace) and the health pollers.
func (r *outRun) startProxies(t *testing.T) {
	t.Helper()
	start := time.Now()
	for _, p := range r.proxies {
		if p.name == "kube-proxy" {
			p.d = p.env.StartKubeProxy(t, "--proxy-mode="+r.mode)
		} else {
			p.d = p.env.StartDaemon(t, "--proxy-mode="+r.mode)
		}
	}
	var wg sync.WaitGroup
	for _, p := range r.proxies {
		wg.Go(func() {
			if _, ok := waitTimestamp(t, p.d, 0, scaleTimeBox); !ok {
				t.Errorf("%s: no first sync within %s\n%s", p.name, scaleTimeBox, p.d.LogTail(10))
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("both proxies synced %d services %s after they started", r.n, secs(time.Since(start)))
	for _, p := range r.proxies {
		for _, svc := range r.echo {
			for _, proto := range []string{"tcp", "udp"} {
				addr := hostPort(svc.Spec.ClusterIP, 80)
				err := framework.WaitFor(converge, func() (bool, error) {
					_, err := framework.Echo(t.Context(), p.env.Topo.ClientNS, proto, addr)
					return err == nil, err
				})
				if err != nil {
					t.Fatalf("%s: %s %s never answered: %v", p.name, proto, addr, err)
				}
				p.loops = append(p.loops, framework.StartEchoLoop(p.env.Topo.ClientNS, proto, addr, outProbeEvery))
			}
		}
		direct := hostPort(p.env.Topo.Pods[1].IP, framework.EchoPort)
		for _, proto := range []string{"tcp", "udp"} {
			p.control = append(p.control, framework.StartEchoLoop(p.env.Topo.ClientNS, proto, direct, outProbeEvery))
		}
		p.health = framework.PollHealth(p.d, outHealthEvery)
	}
}
