package main

import (
	"slices"
	"time"
)

// Result is one workload's figures; it is printed as one JSON line.
type Result struct {
	Workload string  `json:"workload"`
	Ops      int64   `json:"ops"`    // connections, requests or bytes
	Errors   int64   `json:"errors"` // failed operations
	Seconds  float64 `json:"seconds"`
	Rate     float64 `json:"rate"` // ops per second (bits per second for stream)
	// Connect latency (short, latency) in microseconds.
	ConnectP50 float64 `json:"connect_p50_us,omitempty"`
	ConnectP99 float64 `json:"connect_p99_us,omitempty"`
	// CPU of the whole machine over the run, per operation (per connection,
	// request or MB), microseconds: system+irq+softirq, and every busy state.
	KernelPerOp float64 `json:"kernel_us_per_op"`
	BusyPerOp   float64 `json:"busy_us_per_op"`
	// The machine's busy share over the run (1 = every CPU busy).
	Busy float64 `json:"busy"`
}

// perOpUnit is the divisor that turns Ops into the unit CPU is charged
// per: a stream's bytes are charged per MB.
func (r *Result) perOpUnit() float64 {
	if r.Workload == "stream" {
		return float64(r.Ops) / 1e6
	}
	return float64(r.Ops)
}

func (r *Result) setCPU(d cpuTimes) {
	if u := r.perOpUnit(); u > 0 {
		r.KernelPerOp = d.kernel().Seconds() * 1e6 / u
		r.BusyPerOp = d.busy().Seconds() * 1e6 / u
	}
	if all := d.all(); all > 0 {
		r.Busy = float64(d.busy()) / float64(all)
	}
}

// percentileUS is the p-th percentile (nearest rank) of ds in microseconds.
func percentileUS(ds []time.Duration, p int) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	return float64(s[max(0, min(i, len(s))-1)]) / 1e3
}
