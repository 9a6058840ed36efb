package main

import (
	"fmt"
	"slices"
	"time"
)

// result is one run of one mode: what the client measured.
type result struct {
	Conns     int             `json:"conns"`
	Errors    int             `json:"errors"`
	Elapsed   time.Duration   `json:"elapsed"`
	Latencies []time.Duration `json:"latencies,omitempty"`
}

// connsPerSecond is the throughput of the run.
func (r result) connsPerSecond() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Conns) / r.Elapsed.Seconds()
}

// percentile returns the p-th percentile (0 < p <= 100) by the
// nearest-rank method: the smallest latency with at least p % of them at
// or below it.
func percentile(lat []time.Duration, p float64) time.Duration {
	if len(lat) == 0 {
		return 0
	}
	s := slices.Clone(lat)
	slices.Sort(s)
	rank := int(float64(len(s))*p/100 + 0.999999)
	rank = min(max(rank, 1), len(s))
	return s[rank-1]
}

// summary is one row of the report.
type summary struct {
	mode     string
	run      string
	cps      float64
	p50, p99 time.Duration
	errors   int
}

func summarize(mode, run string, r result) summary {
	return summary{mode: mode, run: run, cps: r.connsPerSecond(),
		p50: percentile(r.Latencies, 50), p99: percentile(r.Latencies, 99), errors: r.Errors}
}

// medianRun is the run with the median throughput.
func medianRun(rows []summary) summary {
	s := slices.Clone(rows)
	slices.SortFunc(s, func(a, b summary) int {
		switch {
		case a.cps < b.cps:
			return -1
		case a.cps > b.cps:
			return 1
		}
		return 0
	})
	m := s[len(s)/2]
	m.run = "median"
	return m
}

func (s summary) String() string {
	return fmt.Sprintf("%-10s %-7s %10.0f %10s %10s %7d", s.mode, s.run, s.cps,
		s.p50.Round(time.Microsecond), s.p99.Round(time.Microsecond), s.errors)
}
