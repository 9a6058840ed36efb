package hollow

import (
	"math"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	xs := ms(5, 1, 4, 2, 3, 10, 9, 8, 7, 6)
	for _, c := range []struct {
		p    float64
		want int
	}{{50, 5}, {99, 10}, {100, 10}, {0, 1}, {10, 1}, {11, 2}} {
		if got := percentile(xs, c.p); got != time.Duration(c.want)*time.Millisecond {
			t.Errorf("p%v = %v, want %dms", c.p, got, c.want)
		}
	}
	if percentile(nil, 50) != 0 {
		t.Error("percentile of none")
	}
	if xs[0] != 5*time.Millisecond {
		t.Error("percentile sorted its input")
	}
}

func TestFitLine(t *testing.T) {
	l, ok := fitLine([]float64{10, 50, 100}, []float64{12, 52, 102})
	if !ok || math.Abs(l.Slope-1) > 1e-9 || math.Abs(l.Intercept-2) > 1e-9 || math.Abs(l.At(5000)-5002) > 1e-6 {
		t.Errorf("fit %+v %v", l, ok)
	}
	if _, ok := fitLine([]float64{10, 10}, []float64{1, 2}); ok {
		t.Error("fit through one x")
	}
	if _, ok := fitLine([]float64{10}, []float64{1}); ok {
		t.Error("fit through one point")
	}
}

func TestProbeBook(t *testing.T) {
	b := newProbeBook()
	w := time.Unix(100, 0)
	if _, _, ok := b.fanout(0); ok {
		t.Error("fanout of an unwritten probe")
	}
	b.wrote(0, w)
	b.saw(0, "a", w.Add(10*time.Millisecond))
	b.saw(0, "b", w.Add(30*time.Millisecond))
	b.saw(0, "b", w.Add(90*time.Millisecond)) // a later report of the same proxy
	b.saw(1, "a", w)                          // probe 1 not written yet
	last, n, ok := b.fanout(0)
	if !ok || n != 2 || last != 30*time.Millisecond || b.count(0) != 2 {
		t.Errorf("fanout %v %d %v", last, n, ok)
	}
	if got := b.each(0); len(got) != 2 {
		t.Errorf("each %v", got)
	}
	if b.each(1) != nil {
		t.Error("latencies of an unwritten probe")
	}
}
