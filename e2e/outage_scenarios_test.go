//go:build e2e

package e2e

import (
	"errors"
	"fmt"
	"net"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/switchyard-proxy/switchyard/e2e/framework"
)

// outScenario is one scenario's window: the apiserver (or etcd) went
// down at downAt and was back, the change written, at upAt.
type outScenario struct {
	name, line   string
	down         time.Duration // 0: a restart
	downAt, upAt time.Time
	change       *outChange
	rss          map[string]int64   // each proxy's RSS when its peak was reset
	restErrs     map[string]float64 // each proxy's failed API requests before downAt
}

// apiServerOutage stops the kube-apiserver for down, changes r.changed
// Services' endpoints straight in etcd, starts it again and measures each
// proxy's catch-up.
func (r *outRun) apiServerOutage(t *testing.T, down time.Duration) {
	t.Helper()
	sc := &outScenario{name: fmt.Sprintf("apiserver down %s", down), line: "outage", down: down,
		change: r.nextChange(t), restErrs: r.restErrors(t)}
	stopped, err := r.priv.Cluster.StopAPIServer()
	if err != nil {
		t.Fatal(err)
	}
	sc.downAt = time.Now()
	time.Sleep(down)
	sc.change.write(t, r)
	sc.rss = r.resetPeaks(t)
	if err := stopped.Start(t.Context()); err != nil {
		t.Fatalf("restarting kube-apiserver: %v", err)
	}
	sc.upAt = time.Now()
	t.Logf("apiserver down %s (%d services changed in etcd meanwhile), ready again", secs(sc.upAt.Sub(sc.downAt)), len(sc.change.idx))
	r.measure(t, sc)
}

// etcdKill kills etcd under the watching kube-apiserver, starts it again
// after down, then changes r.changed Services in etcd: the apiserver's
// watch cache may carry the proxies' watches over the gap.
func (r *outRun) etcdKill(t *testing.T, down time.Duration) {
	t.Helper()
	sc := &outScenario{name: fmt.Sprintf("etcd killed %s", down), line: "outage-etcd", down: down,
		change: r.nextChange(t), restErrs: r.restErrors(t), rss: r.resetPeaks(t)}
	killed, err := r.priv.Cluster.KillEtcd()
	if err != nil {
		t.Fatal(err)
	}
	sc.downAt = time.Now()
	time.Sleep(down)
	if err := killed.Start(t.Context()); err != nil {
		t.Fatalf("restarting etcd: %v", err)
	}
	if err := r.waitReady(t); err != nil {
		t.Fatalf("kube-apiserver not ready after etcd came back: %v", err)
	}
	sc.change.write(t, r)
	sc.upAt = time.Now()
	t.Logf("etcd killed for %s; apiserver ready and %d services changed %s after it was killed", down, len(sc.change.idx), secs(sc.upAt.Sub(sc.downAt)))
	r.measure(t, sc)
}

// apiServerRestart restarts the kube-apiserver at once (a rolling
// restart) and then changes r.changed Services.
func (r *outRun) apiServerRestart(t *testing.T) {
	t.Helper()
	sc := &outScenario{name: "apiserver restarted", line: "outage-restart",
		change: r.nextChange(t), restErrs: r.restErrors(t), rss: r.resetPeaks(t)}
	sc.downAt = time.Now()
	stopped, err := r.priv.Cluster.StopAPIServer()
	if err != nil {
		t.Fatal(err)
	}
	if err := stopped.Start(t.Context()); err != nil {
		t.Fatalf("restarting kube-apiserver: %v", err)
	}
	sc.change.write(t, r)
	sc.upAt = time.Now()
	t.Logf("apiserver restarted in %s, then %d services changed", secs(sc.upAt.Sub(sc.downAt)), len(sc.change.idx))
	r.measure(t, sc)
}

// restErrors reads each proxy's count of API requests that got no answer
// (client-go's rest_client_requests_total{code="<error>"}).
func (r *outRun) restErrors(t *testing.T) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, p := range r.proxies {
		text, err := p.d.Metrics(t.Context())
		if err != nil {
			t.Errorf("%s: %v", p.name, err)
			continue
		}
		// No sample: no request has failed so far.
		out[p.name], _ = framework.ParseMetric(text, "rest_client_requests_total", map[string]string{"code": "<error>"})
	}
	return out
}

// waitReady waits for the kube-apiserver's /readyz (etcd included).
func (r *outRun) waitReady(t *testing.T) error {
	return framework.WaitFor(2*time.Minute, func() (bool, error) {
		body, err := r.cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(t.Context())
		return err == nil && string(body) == "ok", err
	})
}

// outChange is one scenario's change: background Services idx get
// endpoint addresses in band (10.band.x.y) instead of their own.
type outChange struct {
	idx      []int
	band     int
	old, new []string
}

// nextChange picks the next scenario's Services: every n/changed-th,
// shifted by the scenario's number, so that no two scenarios change the
// same Service; each gets addresses of a band of its own.
func (r *outRun) nextChange(t *testing.T) *outChange {
	t.Helper()
	stride := r.n / r.changed
	round := r.rounds
	r.rounds++
	if round >= stride {
		t.Fatalf("%d services changed per scenario leave room for %d scenarios among %d services", r.changed, stride, r.n)
	}
	c := &outChange{band: 251 + round}
	for j := range r.changed {
		i := j*stride + round
		c.idx = append(c.idx, i)
		c.old = append(c.old, backgroundAddr(corev1.IPv4Protocol, 250, i/250, i))
		c.new = append(c.new, backgroundAddr(corev1.IPv4Protocol, c.band, i/250, i))
	}
	return c
}

// write changes the Services' EndpointSlices straight in etcd.
func (c *outChange) write(t *testing.T, r *outRun) {
	t.Helper()
	err := framework.Parallel(len(c.idx), 8, func(j int) error {
		slice := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: outBackgroundNS, Name: backgroundSliceName(c.idx[j], corev1.IPv4Protocol)}}
		key, err := framework.StorageKey(slice)
		if err != nil {
			return err
		}
		return r.etcd.Update(t.Context(), key, func(obj runtime.Object) error {
			s, ok := obj.(*discoveryv1.EndpointSlice)
			if !ok || len(s.Endpoints) != 1 {
				return fmt.Errorf("%s is not a slice of one endpoint: %T", key, obj)
			}
			s.Endpoints[0].Addresses = []string{c.new[j]}
			s.Generation++
			return nil
		})
	})
	if err != nil {
		t.Fatalf("changing services in etcd: %v", err)
	}
}

// resetPeaks resets every proxy's VmHWM and returns their RSS now.
func (r *outRun) resetPeaks(t *testing.T) map[string]int64 {
	t.Helper()
	rss := map[string]int64{}
	for _, p := range r.proxies {
		if err := framework.ResetPeakMemory(p.d.PID()); err != nil {
			t.Fatalf("%s: %v", p.name, err)
		}
		m, err := framework.ReadMemory(p.d.PID())
		if err != nil {
			t.Fatalf("%s: %v", p.name, err)
		}
		rss[p.name] = m.RSS
	}
	return rss
}

// outSettle is how long after the last proxy caught up the measurement
// window stays open (its relist's garbage, late health answers).
const outSettle = 5 * time.Second

// measure waits until every proxy has the scenario's change in its
// kernel, then records a row per proxy over [downAt, end]: its probers'
// connections, its catch-up from upAt, its peak memory, its lists and
// watches from its last resourceVersion (audit log), its API requests that
// got no answer, and its health answers while down and while catching up.
func (r *outRun) measure(t *testing.T, sc *outScenario) {
	t.Helper()
	catchUp := make([]outCatchUp, len(r.proxies))
	var wg sync.WaitGroup
	for i, p := range r.proxies {
		wg.Go(func() { catchUp[i] = r.waitKernel(t, p, sc.change, sc.upAt) })
	}
	wg.Wait()
	time.Sleep(outSettle)
	end := time.Now()
	events, err := framework.ReadAudit(r.audit)
	if err != nil {
		t.Errorf("audit log: %v", err)
	}
	restErrs := r.restErrors(t)
	for i, p := range r.proxies {
		row := outRow{scenario: sc.name, line: sc.line, proxy: p.name, down: sc.down, catchUp: catchUp[i],
			beforeRSS: sc.rss[p.name], restErrors: restErrs[p.name] - sc.restErrs[p.name]}
		if m, err := framework.ReadMemory(p.d.PID()); err == nil {
			row.peakRSS = m.Peak
		} else {
			t.Errorf("%s: %v", p.name, err)
		}
		row.lists, row.fromRV = framework.ListsAndWatches(events, p.user, sc.downAt)
		for _, l := range p.loops {
			s := summarizeWindow(l.Results(), sc.downAt, end)
			row.total += s.Total
			row.failed += s.Failed
			row.failures = append(row.failures, outFailureTimes(l.Results(), sc.downAt, end)...)
		}
		row.unexplained = unexplained(row.failures, r.controlFailures(sc.downAt, end))
		for _, l := range p.control {
			row.controlFailed += len(outFailureTimes(l.Results(), sc.downAt, end))
		}
		if len(row.failures) > 0 {
			slices.SortFunc(row.failures, func(a, b outFailure) int { return a.at.Compare(b.at) })
			t.Logf("%s, %s: failed connections %s", sc.name, p.name, describeFailures(row.failures, sc.downAt, sc.upAt))
		}
		samples := p.health.Samples()
		row.healthDown = healthCodes(samples, sc.downAt, sc.upAt)
		row.healthUp = healthCodes(samples, sc.upAt, end)
		if catchUp[i].err != nil {
			t.Errorf("%s, %s: %v", sc.name, p.name, catchUp[i].err)
		}
		if sc.line == "outage-etcd" && p.name == "switchyard" && sumCounts(row.lists) > 0 {
			// The apiserver kept its watch cache and the proxy's watches
			// over etcd's gap: listing again would be a waste.
			t.Errorf("%s: switchyard listed %v again", sc.name, row.lists)
		}
		r.out.add(row)
		t.Log(row.resultLine())
	}
}

// outCatchUp is when a proxy had a change in its kernel: after the start
// of the last read that lacked it (or the apiserver's readiness) and by
// the end of the first read that showed it.
type outCatchUp struct {
	after, by time.Duration // from the apiserver's readiness
	err       error
}

// waitKernel reads p's rules until every changed Service's new address is
// there. A sync writes a table in one transaction, so the new address
// being there means the change is in force; the old one may linger a
// while in a chain nothing jumps to (kube-proxy deletes those in its
// periodic cleanup only), which is why it is not looked for.
func (r *outRun) waitKernel(t *testing.T, p *outProxy, c *outChange, upAt time.Time) outCatchUp {
	var last string
	lower := upAt
	for time.Since(upAt) < outCatchUpLimit {
		start := time.Now()
		addrs, err := r.kernelAddrs(t, p)
		if err != nil {
			last = err.Error()
		} else if missing := changeMissing(addrs, c); missing == 0 {
			return outCatchUp{after: lower.Sub(upAt), by: time.Since(upAt)}
		} else {
			last = fmt.Sprintf("%d of %d new addresses missing", missing, len(c.new))
			lower = start
		}
		time.Sleep(200 * time.Millisecond)
	}
	return outCatchUp{err: fmt.Errorf("the change was not in the kernel %s after the apiserver was back: %s", outCatchUpLimit, last)}
}

// ipv4Re finds the IPv4 addresses of a rules dump (in nftables' chain
// names too, e.g. "__10.250.0.2/8080").
var ipv4Re = regexp.MustCompile(`\d+\.\d+\.\d+\.\d+`)

// kernelAddrs returns the IPv4 addresses in p's rules: the nat table of
// iptables-save in iptables mode, the ruleset in nftables mode.
func (r *outRun) kernelAddrs(t *testing.T, p *outProxy) (map[string]bool, error) {
	argv := []string{"iptables-save", "-t", "nat"}
	if r.mode == "nftables" {
		argv = []string{"nft", "list", "ruleset"}
	}
	out, err := framework.RunIn(t.Context(), p.env.Topo.NodeNS, argv...)
	if err != nil {
		return nil, fmt.Errorf("%v: %w", argv, err)
	}
	addrs := map[string]bool{}
	for _, a := range ipv4Re.FindAllString(out, -1) {
		addrs[a] = true
	}
	return addrs, nil
}

// changeMissing counts the change's new addresses absent from addrs.
func changeMissing(addrs map[string]bool, c *outChange) (missing int) {
	for _, a := range c.new {
		if !addrs[a] {
			missing++
		}
	}
	return missing
}

// outFailure is one failed request of a prober.
type outFailure struct {
	at  time.Time
	err error
}

// outFailureTimes lists the failed requests in [from, to).
func outFailureTimes(results []framework.EchoResult, from, to time.Time) []outFailure {
	var out []outFailure
	for _, r := range results {
		if r.Err != nil && !r.At.Before(from) && r.At.Before(to) {
			out = append(out, outFailure{at: r.At, err: r.Err})
		}
	}
	return out
}

// outStall is how close a failed probe of the direct path must be to a
// failed probe through a Service for both to count as the machine's
// stall: the probes time out after 2 s.
const outStall = 3 * time.Second

// controlFailures lists the failures of every node's direct probes in
// [from, to): a stall of the loaded machine fails them on any node alike.
func (r *outRun) controlFailures(from, to time.Time) []outFailure {
	var out []outFailure
	for _, p := range r.proxies {
		for _, l := range p.control {
			out = append(out, outFailureTimes(l.Results(), from, to)...)
		}
	}
	return out
}

// unexplained counts the failures through a Service with no failure of a
// direct probe within outStall, and not the client's own: those the proxy
// must answer for.
func unexplained(fs, control []outFailure) int {
	n := 0
	for _, f := range fs {
		if !clientSide(f.err) && !slices.ContainsFunc(control, func(c outFailure) bool {
			d := f.at.Sub(c.at)
			return d < outStall && d > -outStall
		}) {
			n++
		}
	}
	return n
}

// clientSide tells a failure that never reached the network: connecting
// a UDP socket sends nothing, so a UDP dial that timed out is the prober's
// own (its goroutine did not get a thread in the namespace in time).
func clientSide(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial" && strings.HasPrefix(op.Net, "udp")
}

// describeFailures says when failures happened relative to the outage
// (seconds after it began, and after the return) and the first error.
func describeFailures(fs []outFailure, downAt, upAt time.Time) string {
	var at []string
	for _, f := range fs {
		at = append(at, fmt.Sprintf("%.1f", f.at.Sub(downAt).Seconds()))
	}
	return fmt.Sprintf("at %s s after it went down (back at %.1f s); first: %v", strings.Join(at, " "), upAt.Sub(downAt).Seconds(), fs[0].err)
}

// summarizeWindow is framework.Summarize over the results in [from, to).
func summarizeWindow(results []framework.EchoResult, from, to time.Time) framework.EchoSummary {
	var in []framework.EchoResult
	for _, r := range results {
		if r.At.Before(to) {
			in = append(in, r)
		}
	}
	return framework.Summarize(in, from)
}

// outHealth counts a window's answers of /healthz and /livez by status
// code (0: the request failed).
type outHealth struct{ healthz, livez map[int]int }

func healthCodes(samples []framework.HealthSample, from, to time.Time) outHealth {
	var in []framework.HealthSample
	for _, s := range samples {
		if !s.At.Before(from) && s.At.Before(to) {
			in = append(in, s)
		}
	}
	h, l := framework.CountCodes(in)
	return outHealth{healthz: h, livez: l}
}

// checkProbers stops the probers and health pollers and fails the test on
// any failed connection over the whole run, or on any /livez answer of
// switchyard's but 200.
func (r *outRun) checkProbers(t *testing.T) {
	t.Helper()
	var control []outFailure
	for _, p := range r.proxies {
		for _, l := range p.control {
			control = append(control, outFailureTimes(l.Stop(), time.Time{}, time.Now())...)
		}
	}
	for _, p := range r.proxies {
		var total int
		var failed []outFailure
		for _, l := range p.loops {
			res := l.Stop()
			total += len(res)
			failed = append(failed, outFailureTimes(res, time.Time{}, time.Now())...)
		}
		healthz, livez := framework.CountCodes(p.health.Stop())
		bad := unexplained(failed, control)
		t.Logf("%s over the run: %d connections, %d failed (%d with no failure of a direct probe within %s; direct probes failed %d times); /healthz %v, /livez %v",
			p.name, total, len(failed), bad, outStall, len(control), healthz, livez)
		if bad > 0 {
			t.Errorf("%s: %d of %d connections through existing Services failed while the direct path worked", p.name, bad, total)
		}
		// A poll that got no answer (code 0, the machine too loaded to
		// answer within the client's timeout) is not the daemon saying it
		// is unhealthy; any answer but 200 is.
		if non200(livez)-livez[0] > 0 && p.name == "switchyard" {
			t.Errorf("switchyard's /livez answered %v over the run, want only 200", livez)
		}
	}
}
