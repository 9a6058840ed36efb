package framework

import (
	"errors"
	"os"
	"testing"
	"time"
)

func TestParseMetric(t *testing.T) {
	text := `# HELP kubeproxy_sync_proxy_rules_iptables_restore_failures_total x
# TYPE kubeproxy_sync_proxy_rules_iptables_restore_failures_total counter
kubeproxy_sync_proxy_rules_iptables_restore_failures_total 3
# HELP switchyard_invalid_objects_total x
# TYPE switchyard_invalid_objects_total counter
switchyard_invalid_objects_total{kind="Service",reason="port"} 2
switchyard_invalid_objects_total{kind="Endpoint",reason="address"} 5
# HELP go_goroutines x
# TYPE go_goroutines gauge
go_goroutines 42
`
	cases := []struct {
		name string
		want map[string]string
		val  float64
		err  bool
	}{
		{"kubeproxy_sync_proxy_rules_iptables_restore_failures_total", nil, 3, false},
		{"switchyard_invalid_objects_total", nil, 7, false},
		{"switchyard_invalid_objects_total", map[string]string{"kind": "Service"}, 2, false},
		{"switchyard_invalid_objects_total", map[string]string{"kind": "Node"}, 0, true},
		{"go_goroutines", nil, 42, false},
		{"nope", nil, 0, true},
	}
	for _, tc := range cases {
		got, err := ParseMetric(text, tc.name, tc.want)
		if (err != nil) != tc.err || got != tc.val {
			t.Errorf("ParseMetric(%s, %v) = %v, %v; want %v (error %v)", tc.name, tc.want, got, err, tc.val, tc.err)
		}
	}
}

func TestSummarize(t *testing.T) {
	t0 := time.Unix(100, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	fail := errors.New("refused")
	rs := []EchoResult{
		{At: at(0), Server: "pod0"}, {At: at(100), Err: fail}, {At: at(200), Err: fail},
		{At: at(300), Server: "pod1"}, {At: at(400), Err: fail}, {At: at(500), Server: "pod0"},
	}
	s := Summarize(rs, t0)
	if s.Total != 6 || s.Failed != 3 || s.LongestOutage != 200*time.Millisecond || s.Servers["pod0"] != 2 || s.FirstFailure != fail {
		t.Errorf("Summarize = %+v", s)
	}
	if s := Summarize(rs, at(250)); s.Total != 3 || s.Failed != 1 {
		t.Errorf("Summarize since 250ms = %+v", s)
	}
	if got, ok := FirstSuccessAfter(rs, at(350), nil); !ok || !got.Equal(at(500)) {
		t.Errorf("FirstSuccessAfter = %v, %v", got, ok)
	}
}

func TestRSSBytesOfSelf(t *testing.T) {
	rss, err := RSSBytes(os.Getpid())
	if err != nil || rss < 1<<20 {
		t.Errorf("RSSBytes(self) = %d, %v", rss, err)
	}
	m, err := ReadMemory(os.Getpid())
	if err != nil || m.Anon < 1<<20 || m.File <= 0 || m.Anon+m.File > m.RSS+1<<20 {
		t.Errorf("ReadMemory(self) = %+v, %v", m, err)
	}
}
