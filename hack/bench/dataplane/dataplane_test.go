package main

import (
	"testing"
	"time"
)

func TestParseCPULine(t *testing.T) {
	got, err := parseCPULine("cpu  100 2 30 400 5 6 7 8 0 0")
	if err != nil {
		t.Fatal(err)
	}
	if got.kernel() != 43*clockTick || got.busy() != 145*clockTick || got.all() != 558*clockTick {
		t.Errorf("kernel %v busy %v all %v", got.kernel(), got.busy(), got.all())
	}
	if _, err := parseCPULine("cpu0 1 2 3"); err == nil {
		t.Error("a short line parsed")
	}
}

func TestPercentileUS(t *testing.T) {
	var ds []time.Duration
	for i := 1; i <= 100; i++ {
		ds = append(ds, time.Duration(i)*time.Microsecond)
	}
	if p50, p99 := percentileUS(ds, 50), percentileUS(ds, 99); p50 != 50 || p99 != 99 {
		t.Errorf("p50 %v p99 %v", p50, p99)
	}
	if percentileUS(nil, 50) != 0 {
		t.Error("empty")
	}
}

func TestSetCPUStreamPerMB(t *testing.T) {
	r := Result{Workload: "stream", Ops: 2e6}
	var d cpuTimes
	d[2], d[3] = 10, 10 // 100 ms system, 100 ms idle
	r.setCPU(d)
	if r.KernelPerOp != 50000 || r.Busy != 0.5 {
		t.Errorf("kernel/MB %v busy %v", r.KernelPerOp, r.Busy)
	}
}
