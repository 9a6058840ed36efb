package conntrack

import (
	"errors"
	"io/fs"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-proxy/switchyard/internal/sysctl"
)

// kubeProxyDefaults is KubeProxyConntrackConfiguration's defaulting.
func kubeProxyDefaults() Tuning {
	return Tuning{MaxPerCore: 32768, Min: 131072, TCPEstablishedTimeout: 24 * time.Hour, TCPCloseWaitTimeout: time.Hour}
}

func TestTuningMax(t *testing.T) {
	for _, tc := range []struct {
		name    string
		t       Tuning
		cpus    int
		wantMax int
	}{
		{"min wins on few CPUs", kubeProxyDefaults(), 2, 131072},
		{"scaled wins on many CPUs", kubeProxyDefaults(), 8, 262144},
		{"capped", kubeProxyDefaults(), 64, 1048576},
		{"maxPerCore 0 leaves it alone", Tuning{Min: 131072}, 8, 0},
		{"no floor", Tuning{MaxPerCore: 1000}, 2, 2000},
	} {
		if got := tc.t.Max(tc.cpus); got != tc.wantMax {
			t.Errorf("%s: Max(%d) = %d, want %d", tc.name, tc.cpus, got, tc.wantMax)
		}
	}
}

// kernelDefaults are a fresh namespace's values on a 6.x kernel.
func kernelDefaults() (*sysctl.Fake, *sysctl.Fake) {
	proc := sysctl.NewFake(map[string]int{
		sysctlMax: 65536, sysctlEstablished: 432000, sysctlCloseWait: 60,
		sysctlBeLiberal: 0, sysctlUDPTimeout: 30, sysctlUDPStream: 120,
	})
	return proc, sysctl.NewFake(map[string]int{moduleParamHashsize: 16384})
}

func TestTuneKubeProxyDefaults(t *testing.T) {
	proc, module := kernelDefaults()
	if err := Tune(kubeProxyDefaults(), 2, proc, module); err != nil {
		t.Fatal(err)
	}
	want := []string{sysctlMax + "=131072", sysctlEstablished + "=86400", sysctlCloseWait + "=3600"}
	if !slices.Equal(proc.Writes, want) {
		t.Errorf("proc writes = %v, want %v", proc.Writes, want)
	}
	if !slices.Equal(module.Writes, []string{"hashsize=32768"}) {
		t.Errorf("module writes = %v", module.Writes)
	}
	// A second start writes nothing.
	proc.Writes, module.Writes = nil, nil
	if err := Tune(kubeProxyDefaults(), 2, proc, module); err != nil {
		t.Fatal(err)
	}
	if len(proc.Writes)+len(module.Writes) != 0 {
		t.Errorf("second Tune wrote %v %v", proc.Writes, module.Writes)
	}
}

func TestTuneNeverLowersMax(t *testing.T) {
	proc, module := kernelDefaults()
	proc.Values[sysctlMax] = 262144
	module.Values[moduleParamHashsize] = 8192
	// nf_conntrack_max is read-only outside the initial namespace: not
	// written, so no error.
	proc.ReadOnly[sysctlMax] = true
	if err := Tune(kubeProxyDefaults(), 2, proc, module); err != nil {
		t.Fatal(err)
	}
	if proc.Values[sysctlMax] != 262144 {
		t.Errorf("nf_conntrack_max = %d, want 262144 kept", proc.Values[sysctlMax])
	}
	// The hash size follows the asked-for maximum, as in kube-proxy.
	if module.Values[moduleParamHashsize] != 32768 {
		t.Errorf("hashsize = %d, want 32768", module.Values[moduleParamHashsize])
	}
}

func TestTuneLeavesZeroesAlone(t *testing.T) {
	proc, module := kernelDefaults()
	if err := Tune(Tuning{Min: 500000}, 4, proc, module); err != nil {
		t.Fatal(err)
	}
	if len(proc.Writes)+len(module.Writes) != 0 {
		t.Errorf("zero tuning wrote %v %v", proc.Writes, module.Writes)
	}
}

func TestTuneEverySetting(t *testing.T) {
	proc, module := kernelDefaults()
	tuning := Tuning{
		TCPEstablishedTimeout: 2 * time.Hour, TCPCloseWaitTimeout: 90 * time.Second, TCPBeLiberal: true,
		UDPTimeout: 45 * time.Second, UDPStreamTimeout: 3 * time.Minute,
	}
	if err := Tune(tuning, 2, proc, module); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]int{
		sysctlEstablished: 7200, sysctlCloseWait: 90, sysctlBeLiberal: 1, sysctlUDPTimeout: 45, sysctlUDPStream: 180,
	} {
		if proc.Values[name] != want {
			t.Errorf("%s = %d, want %d", name, proc.Values[name], want)
		}
	}
}

func TestTuneReportsReadOnly(t *testing.T) {
	proc, module := kernelDefaults()
	proc.ReadOnly[sysctlCloseWait] = true
	err := Tune(kubeProxyDefaults(), 2, proc, module)
	if !errors.Is(err, fs.ErrPermission) || !strings.Contains(err.Error(), "nf_conntrack_tcp_timeout_close_wait to 3600") {
		t.Fatalf("Tune with read-only close-wait: %v", err)
	}
	proc, module = kernelDefaults()
	module.ReadOnly[moduleParamHashsize] = true
	if err := Tune(kubeProxyDefaults(), 2, proc, module); err == nil || !strings.Contains(err.Error(), "hashsize") {
		t.Fatalf("Tune with read-only hashsize: %v", err)
	}
}
