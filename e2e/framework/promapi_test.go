package framework

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

func TestParseVectorResponse(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		want    []Sample
		wantErr bool
	}{
		{
			name: "two samples",
			body: `{"status":"success","data":{"resultType":"vector","result":[
				{"metric":{"__name__":"up","instance":"127.0.0.1:10249"},"value":[1700000000.5,"1"]},
				{"metric":{"table":"nat"},"value":[1700000000.5,"17040"]}]}}`,
			want: []Sample{
				{Labels: map[string]string{"__name__": "up", "instance": "127.0.0.1:10249"}, Value: 1},
				{Labels: map[string]string{"table": "nat"}, Value: 17040},
			},
		},
		{name: "empty vector", body: `{"status":"success","data":{"resultType":"vector","result":[]}}`, want: []Sample{}},
		{name: "error status", body: `{"status":"error","errorType":"bad_data","error":"parse error"}`, wantErr: true},
		{name: "scalar", body: `{"status":"success","data":{"resultType":"scalar","result":[1,"2"]}}`, wantErr: true},
		{name: "bad number", body: `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"x"]}]}}`, wantErr: true},
		{name: "not json", body: `<html>`, wantErr: true},
	}
	for _, tc := range tests {
		got, err := ParseVectorResponse([]byte(tc.body))
		if (err != nil) != tc.wantErr {
			t.Errorf("%s: error = %v, wantErr %v", tc.name, err, tc.wantErr)
			continue
		}
		if diff := cmp.Diff(tc.want, got); !tc.wantErr && diff != "" {
			t.Errorf("%s: (-want +got):\n%s", tc.name, diff)
		}
	}
}

func TestPrometheusConfig(t *testing.T) {
	var cfg struct {
		Global        map[string]string `json:"global"`
		ScrapeConfigs []struct {
			JobName        string `json:"job_name"`
			ScrapeInterval string `json:"scrape_interval"`
			ScrapeTimeout  string `json:"scrape_timeout"`
			StaticConfigs  []struct {
				Targets []string `json:"targets"`
			} `json:"static_configs"`
		} `json:"scrape_configs"`
	}
	text := PrometheusConfig(time.Second, "127.0.0.1:10249", "127.0.0.1:9100")
	if err := yaml.UnmarshalStrict([]byte(text), &cfg); err != nil {
		t.Fatalf("config does not parse: %v\n%s", err, text)
	}
	if cfg.Global["scrape_interval"] != "1s" || len(cfg.ScrapeConfigs) != 1 || cfg.ScrapeConfigs[0].ScrapeInterval != "1s" {
		t.Errorf("intervals wrong:\n%s", text)
	}
	want := []string{"127.0.0.1:10249", "127.0.0.1:9100"}
	if cfg.ScrapeConfigs[0].ScrapeTimeout != "1s" {
		t.Errorf("scrape_timeout %q, want 1s (must not exceed the interval)", cfg.ScrapeConfigs[0].ScrapeTimeout)
	}
	if diff := cmp.Diff(want, cfg.ScrapeConfigs[0].StaticConfigs[0].Targets); diff != "" {
		t.Errorf("targets (-want +got):\n%s", diff)
	}
}

// TestPrometheusConfigAcceptedByPromtool checks the rendered file with the
// real tool when it is installed (Debian package prometheus ships promtool).
func TestPrometheusConfigAcceptedByPromtool(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not installed")
	}
	path := filepath.Join(t.TempDir(), "prometheus.yml")
	if err := os.WriteFile(path, []byte(PrometheusConfig(time.Second, "127.0.0.1:10249")), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool, "check", "config", path).CombinedOutput(); err != nil {
		t.Errorf("promtool check config: %v\n%s", err, out)
	}
}
