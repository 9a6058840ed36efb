package main

import (
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	var lat []time.Duration
	for i := 100; i >= 1; i-- { // unsorted on purpose
		lat = append(lat, time.Duration(i)*time.Millisecond)
	}
	for _, tc := range []struct {
		p    float64
		want time.Duration
	}{{50, 50 * time.Millisecond}, {99, 99 * time.Millisecond}, {100, 100 * time.Millisecond}, {1, time.Millisecond}} {
		if got := percentile(lat, tc.p); got != tc.want {
			t.Errorf("p%v = %v, want %v", tc.p, got, tc.want)
		}
	}
	if got := percentile([]time.Duration{7}, 99); got != 7 {
		t.Errorf("one sample: %v", got)
	}
	if lat[0] != 100*time.Millisecond {
		t.Errorf("percentile sorted its input")
	}
}

func TestMedianRunAndRate(t *testing.T) {
	rows := []summary{{cps: 300}, {cps: 100}, {cps: 200}}
	if m := medianRun(rows); m.cps != 200 || m.run != "median" {
		t.Errorf("median = %+v", m)
	}
	if r := (result{Conns: 1000, Elapsed: 2 * time.Second}); r.connsPerSecond() != 500 {
		t.Errorf("rate = %v", r.connsPerSecond())
	}
}
