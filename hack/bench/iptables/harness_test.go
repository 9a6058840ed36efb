package main

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/backends/iptables"
	"github.com/switchyard-proxy/switchyard/internal/iptables/iptablestest"
	"github.com/switchyard-proxy/switchyard/proxier"
)

func TestParseConfig(t *testing.T) {
	env := func(vars map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
	}
	for _, tc := range []struct {
		name    string
		args    []string
		vars    map[string]string
		want    *config
		wantErr string
	}{
		{name: "defaults", want: &config{scales: []int{1000, 10000}, runs: 3, modes: []string{"nft", "legacy"},
			endpoints: 10, partials: 5, chunks: []int{1000, 4000, 10000, 20000}, memory: true}},
		{name: "environment, empty chunk list skips the sweep",
			vars: map[string]string{"BENCH_SCALES": "500", "BENCH_RUNS": "1", "BENCH_MODES": "legacy", "BENCH_CHUNKS": "", "BENCH_MEMORY": "0"},
			want: &config{scales: []int{500}, runs: 1, modes: []string{"legacy"}, endpoints: 10, partials: 5}},
		{name: "flags win", args: []string{"-runs", "7", "-gobench", "/tmp/x"}, vars: map[string]string{"BENCH_RUNS": "2"},
			want: &config{scales: []int{1000, 10000}, runs: 7, modes: []string{"nft", "legacy"}, endpoints: 10, partials: 5,
				chunks: []int{1000, 4000, 10000, 20000}, memory: true, goBench: "/tmp/x"}},
		{name: "bad mode", vars: map[string]string{"BENCH_MODES": "nft ipvs"}, wantErr: `unknown mode "ipvs"`},
		{name: "bad number", vars: map[string]string{"BENCH_RUNS": "0"}, wantErr: "runs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseConfig(tc.args, env(tc.vars))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, got, cmp.AllowUnexported(config{})); d != "" {
				t.Errorf("config (-want +got):\n%s", d)
			}
		})
	}
}

// TestStateAndChange checks the bench State through the real backend and
// the strict fake: a full sync is accepted, and a one-endpoint change is a
// partial sync that rewrites one service's chains only.
func TestStateAndChange(t *testing.T) {
	st := buildState(50, 10)
	if len(st.Services) != 50 || len(st.Endpoints[serviceName(7)]) != 10 {
		t.Fatalf("state has %d services, %d endpoints for svc-7", len(st.Services), len(st.Endpoints[serviceName(7)]))
	}
	fake := iptablestest.NewFake()
	be, err := iptables.New(backendConfig(fake, 0))
	if err != nil {
		t.Fatal(err)
	}
	if err := syncOnce(t.Context(), be, st, &proxier.Diff{Full: true}, true); err != nil {
		t.Fatal(err)
	}
	next, diff := changeOneEndpoint(st, 7, 1)
	if got := next.Endpoints[serviceName(7)][9].IP; got != netip.MustParseAddr("10.200.0.1") {
		t.Errorf("changed endpoint is %v", got)
	}
	if st.Endpoints[serviceName(7)][9].IP == next.Endpoints[serviceName(7)][9].IP {
		t.Errorf("changeOneEndpoint modified its input")
	}
	before := len(fake.Restores())
	if err := syncOnce(t.Context(), be, next, diff, false); err != nil {
		t.Fatal(err)
	}
	restores := fake.Restores()[before:]
	if len(restores) != 1 || strings.Count(string(restores[0].Data), ":KUBE-") != 3 {
		t.Errorf("one-endpoint change sent %d restores; want one declaring 3 chains (SVC, new SEP, old SEP)", len(restores))
	}
	rs := iptables.Render(backendConfig(nil, 0), next, v1.IPv4Protocol)
	if n := rs.RuleCount("nat"); n < 50*10*3 {
		t.Errorf("nat has %d rules, want at least 3 per endpoint", n)
	}
}

func TestParseGoBench(t *testing.T) {
	out := `goos: linux
pkg: github.com/switchyard-proxy/switchyard/backends/iptables
BenchmarkRender/services=1000/endpoints=10-2   3   34061972 ns/op   4755570 payload-bytes   22292402 B/op   240337 allocs/op
PASS
pkg: github.com/switchyard-proxy/switchyard/proxier
BenchmarkSnapshot-2   100   1500 ns/op
`
	got, err := parseGoBench(strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].pkg != "backends/iptables" || got[0].name != "BenchmarkRender/services=1000/endpoints=10" ||
		got[1].pkg != "proxier" || got[1].name != "BenchmarkSnapshot" {
		t.Fatalf("parsed %+v", got)
	}
	if s := got[0].summary(); s != "34.1 ms/op, 4.756e+06 payload-bytes, 22.3 MB/op, 240337 allocs/op" {
		t.Errorf("summary = %q", s)
	}
}

func TestMedianAndFormat(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(tc.in); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
	for d, want := range map[time.Duration]string{
		150 * time.Second: "150 s", 1500 * time.Millisecond: "1.50 s", 250 * time.Millisecond: "250 ms", 52600 * time.Microsecond: "52.6 ms",
	} {
		if got := fmtDur(d); got != want {
			t.Errorf("fmtDur(%v) = %q, want %q", d, got, want)
		}
	}
	if got := scaleCase("nft", 10000, 10); got != "nft 10k svc x 10 ep" {
		t.Errorf("scaleCase = %q", got)
	}
}

func TestReportPrintsOneAlignedTable(t *testing.T) {
	var rep report
	rep.add("scale", "nft 1k", "full sync", "1.00 s")
	rep.addTarget("scale", "nft 1k", "ratio", "1.5x", "<= 1.2x", false)
	rep.addTarget("memory", "nft 1k", "RSS", "40 MiB", "<= 150 MiB", true)
	var b strings.Builder
	if err := rep.print(&b); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
	if len(lines) != 5 || !strings.HasPrefix(lines[0], "SECTION") || strings.TrimSpace(lines[3]) != "" {
		t.Fatalf("table:\n%s", b.String())
	}
	if !strings.HasSuffix(lines[2], "MISSED") || !strings.HasSuffix(lines[4], "yes") {
		t.Errorf("verdicts wrong:\n%s", b.String())
	}
}
