package hollow

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func sample(proxy string, n int, perNode time.Duration) result {
	return result{
		proxy: proxy, n: n, changes: 10,
		ready: time.Duration(n) * time.Second, readyCPU: time.Duration(n) * 100 * time.Millisecond,
		quietCPU: time.Duration(n) * 20 * time.Millisecond, probeCPU: time.Duration(n) * perNode,
		watchBytes: float64(n) * 10 * 1000, apiRSS: int64(500+n) << 20,
		fanout: []time.Duration{time.Duration(n) * time.Millisecond}, each: []time.Duration{time.Millisecond},
		proxyRSS: []int64{int64(n) * 30 << 20}, proxyAnon: []int64{int64(n) * 20 << 20},
	}
}

func TestProjectFitsEachQuantity(t *testing.T) {
	rs := []result{sample("sy", 10, 10*time.Millisecond), sample("sy", 50, 10*time.Millisecond), sample("sy", 100, 10*time.Millisecond)}
	got := map[string]float64{}
	for _, q := range project(rs, 5000, 20*time.Second) {
		got[q.name] = q.at
	}
	want := map[string]float64{
		"apiserver CPU, all proxies' initial lists": 500,
		"apiserver CPU, idle with N watching":       5,
		"apiserver CPU per endpoint change":         5000,
		"watch bytes per endpoint change":           5000,
		"apiserver RSS":                             5500,
		"memory per proxy (RSS)":                    30,
		"memory per proxy (anonymous)":              20,
		"fan-out p50":                               5000,
	}
	for k, v := range want {
		if d := got[k] - v; d > 1e-6 || d < -1e-6 {
			t.Errorf("%s at 5000: %v, want %v", k, got[k], v)
		}
	}
	if project(rs[:1], 5000, time.Second) != nil {
		t.Error("a projection from one count")
	}
}

func TestReportLines(t *testing.T) {
	rs := []result{sample("switchyard", 100, time.Millisecond), sample("switchyard", 10, time.Millisecond), sample("kube-proxy", 10, time.Millisecond)}
	l := largest(rs, []string{"switchyard", "kube-proxy", "absent"})
	if len(l) != 2 || l[0].n != 100 || l[1].proxy != "kube-proxy" {
		t.Fatalf("largest: %+v", l)
	}
	want := "hollow: proxy=switchyard n=100 fanout_p50_ms=100.0 fanout_p99_ms=100.0 apiserver_cpu_s=0.10 per_proxy_mb=30.0"
	if got := resultLine(l[0]); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	var b bytes.Buffer
	writeTable(&b, rs, 20*time.Second)
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 5 || !strings.HasPrefix(lines[2], "| 10 | switchyard |") || !strings.HasPrefix(lines[4], "| 100 | switchyard |") {
		t.Errorf("table:\n%s", b.String())
	}
	b.Reset()
	writeProjection(&b, rs, []string{"switchyard", "kube-proxy"}, 5000, 20*time.Second)
	if !strings.Contains(b.String(), "| memory per proxy (RSS) (MB) | switchyard |") || strings.Contains(b.String(), "| kube-proxy |") {
		t.Errorf("projection (kube-proxy has one count, so no fit):\n%s", b.String())
	}
}
