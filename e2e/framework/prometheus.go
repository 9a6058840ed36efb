package framework

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// PrometheusAddr is where StartPrometheus serves inside its namespace.
const PrometheusAddr = "127.0.0.1:9090"

// PrometheusBinEnv may point at a prometheus binary; default: $PATH. The
// value "none" (a VM run without one) makes StartPrometheus skip the test.
const PrometheusBinEnv = "SWITCHYARD_PROMETHEUS"

// Prometheus is a Prometheus server scraping targets inside a namespace.
type Prometheus struct {
	*Process
	NS   string
	Addr string
}

// Sample is one element of an instant-vector query result.
type Sample struct {
	Labels map[string]string
	Value  float64
}

// PrometheusConfig renders a config scraping targets every interval.
func PrometheusConfig(interval time.Duration, targets ...string) string {
	quoted := make([]string, len(targets))
	for i, t := range targets {
		quoted[i] = strconv.Quote(t)
	}
	return fmt.Sprintf(`global:
  scrape_interval: %[1]s
  evaluation_interval: %[1]s
scrape_configs:
- job_name: switchyard
  scrape_interval: %[1]s
  scrape_timeout: %[1]s
  static_configs:
  - targets: [%[2]s]
`, interval, strings.Join(quoted, ", "))
}

// StartPrometheus runs Prometheus in ns scraping targets (default: the
// daemon's metrics address) every second, with storage in a temp dir, and
// waits until it is ready.
func StartPrometheus(t testing.TB, ns string, targets ...string) *Prometheus {
	t.Helper()
	if len(targets) == 0 {
		targets = []string{DaemonMetricsAddr}
	}
	return StartPrometheusConfig(t, ns, PrometheusAddr, PrometheusConfig(time.Second, targets...))
}

// StartPrometheusConfig runs Prometheus in ns with the given
// configuration (rule files it names by absolute path), serving on addr
// inside ns, with storage in a temp dir, and waits until it is ready.
func StartPrometheusConfig(t testing.TB, ns, addr, config string) *Prometheus {
	t.Helper()
	if os.Getenv(PrometheusBinEnv) == "none" {
		t.Skipf("%s=none: no Prometheus in this environment", PrometheusBinEnv)
	}
	bin, err := prometheusBinary()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	p := &Prometheus{NS: ns, Addr: addr}
	p.Process = StartInNetns(t, "prometheus-"+ns, ns, bin,
		"--config.file="+cfgPath, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+p.Addr, "--log.level=warn")
	if err := p.waitReady(startTimeout); err != nil {
		t.Fatalf("prometheus in %s: %v", ns, err)
	}
	return p
}

func prometheusBinary() (string, error) {
	if p := os.Getenv(PrometheusBinEnv); p != "" {
		return p, nil
	}
	p, err := exec.LookPath("prometheus")
	if err != nil {
		return "", fmt.Errorf("prometheus not found (apt-get install prometheus, or set %s): %w", PrometheusBinEnv, err)
	}
	return p, nil
}

func (p *Prometheus) waitReady(timeout time.Duration) error {
	return WaitFor(timeout, func() (bool, error) {
		if err := exitError(p.Process); err != nil {
			return false, err
		}
		code, body, err := httpGetIn(context.Background(), p.NS, "http://"+p.Addr+"/-/ready")
		if err == nil && code != http.StatusOK {
			err = fmt.Errorf("/-/ready: %d %s", code, body)
		}
		return err == nil, err
	})
}

// Query evaluates an instant-vector PromQL expression now.
func (p *Prometheus) Query(ctx context.Context, expr string) ([]Sample, error) {
	u := "http://" + p.Addr + "/api/v1/query?query=" + url.QueryEscape(expr)
	code, body, err := httpGetIn(ctx, p.NS, u)
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("query %q: HTTP %d: %s", expr, code, body)
	}
	return ParseVectorResponse([]byte(body))
}

// Series is one series of a range query: its labels and its points.
type Series struct {
	Labels map[string]string
	Times  []time.Time
	Values []float64
}

// QueryRange evaluates expr over [start, end] every step.
func (p *Prometheus) QueryRange(ctx context.Context, expr string, start, end time.Time, step time.Duration) ([]Series, error) {
	q := url.Values{"query": {expr}, "start": {strconv.FormatInt(start.Unix(), 10)},
		"end": {strconv.FormatInt(end.Unix(), 10)}, "step": {strconv.Itoa(int(step.Seconds()))}}
	code, body, err := httpGetIn(ctx, p.NS, "http://"+p.Addr+"/api/v1/query_range?"+q.Encode())
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("query_range %q: HTTP %d: %s", expr, code, body)
	}
	return ParseMatrixResponse([]byte(body))
}
