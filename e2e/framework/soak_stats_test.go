package framework

import (
	"math"
	"os"
	"testing"
)

const histText = `# TYPE d histogram
d_bucket{f="a",le="0.1"} 50
d_bucket{f="a",le="1"} 90
d_bucket{f="a",le="+Inf"} 100
d_sum{f="a"} 30
d_count{f="a"} 100
d_bucket{f="b",le="0.1"} 0
d_bucket{f="b",le="1"} 0
d_bucket{f="b",le="+Inf"} 7
d_sum{f="b"} 70
d_count{f="b"} 7
`

func TestParseHistogramQuantile(t *testing.T) {
	h, err := ParseHistogram(histText, "d", map[string]string{"f": "a"})
	if err != nil {
		t.Fatal(err)
	}
	if h.Count != 100 || len(h.Bounds) != 3 || h.Counts[1] != 90 {
		t.Fatalf("parsed %+v", h)
	}
	for _, c := range []struct{ q, want float64 }{{0.5, 0.1}, {0.25, 0.05}, {0.7, 0.55}, {0.99, 1}} {
		got, ok := h.Quantile(c.q)
		if !ok || math.Abs(got-c.want) > 1e-9 {
			t.Errorf("q%.2f = %v %v, want %v", c.q, got, ok, c.want)
		}
	}
	all, _ := ParseHistogram(histText, "d", nil)
	if all.Count != 107 || all.Counts[2] != 107 {
		t.Errorf("sum over both: %+v", all)
	}
	if _, err := ParseHistogram(histText, "missing", nil); err == nil {
		t.Error("a missing histogram parsed")
	}
}

func TestHistogramSince(t *testing.T) {
	prev := Histogram{Bounds: []float64{1, math.Inf(1)}, Counts: []uint64{10, 12}, Count: 12}
	cur := Histogram{Bounds: []float64{1, math.Inf(1)}, Counts: []uint64{10, 15}, Count: 15}
	d := cur.Since(prev)
	if d.Count != 3 || d.Counts[0] != 0 || d.Counts[1] != 3 {
		t.Fatalf("delta %+v", d)
	}
	// All three above the last finite bound: the quantile is that bound.
	if q, ok := d.Quantile(0.99); !ok || q != 1 {
		t.Errorf("q99 of the delta = %v %v, want 1", q, ok)
	}
	if _, ok := (Histogram{}).Quantile(0.5); ok {
		t.Error("an empty histogram has a quantile")
	}
	// A restarted process (counts went down) gives the new histogram.
	if r := prev.Since(cur); r.Count != prev.Count {
		t.Errorf("after a reset: %+v", r)
	}
}

func TestSlope(t *testing.T) {
	xs := []float64{0, 1, 2, 3}
	if s, ok := Slope(xs, []float64{5, 7, 9, 11}); !ok || s != 2 {
		t.Errorf("slope of a line = %v %v, want 2", s, ok)
	}
	if s, ok := Slope(xs, []float64{3, 3, 3, 3}); !ok || s != 0 {
		t.Errorf("flat slope = %v %v", s, ok)
	}
	if _, ok := Slope([]float64{1}, []float64{1}); ok {
		t.Error("one point has a slope")
	}
	if _, ok := Slope([]float64{2, 2}, []float64{1, 5}); ok {
		t.Error("equal xs have a slope")
	}
}

func TestOpenFDs(t *testing.T) {
	before, err := OpenFDs(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if after, _ := OpenFDs(os.Getpid()); after != before+1 {
		t.Errorf("open fds %d, then %d after opening one", before, after)
	}
	if _, err := OpenFDs(-1); err == nil {
		t.Error("pid -1 has fds")
	}
}
