package framework

import (
	"fmt"
	"math"
	"os"
	"sort"
	"strings"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// OpenFDs counts the open file descriptors of pid (/proc/PID/fd).
func OpenFDs(pid int) (int, error) {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return 0, err
	}
	return len(ents), nil
}

// Histogram is a Prometheus histogram's cumulative buckets, summed over
// the samples whose labels include the ones asked for.
type Histogram struct {
	Bounds []float64 // upper bounds, ascending, +Inf last
	Counts []uint64  // cumulative counts per bound
	Count  uint64
}

// ParseHistogram reads histogram name from a scrape (text exposition
// format), summing the samples whose labels include want.
func ParseHistogram(text, name string, want map[string]string) (Histogram, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		return Histogram{}, fmt.Errorf("parse metrics: %w", err)
	}
	fam, ok := fams[name]
	if !ok {
		return Histogram{}, fmt.Errorf("no metric %s", name)
	}
	byBound := map[float64]uint64{}
	var h Histogram
	for _, m := range fam.GetMetric() {
		labels := model.LabelSet{}
		for _, lp := range m.GetLabel() {
			labels[model.LabelName(lp.GetName())] = model.LabelValue(lp.GetValue())
		}
		mh := m.GetHistogram()
		if mh == nil || !matches(labels, want) {
			continue
		}
		h.Count += mh.GetSampleCount()
		for _, b := range mh.GetBucket() {
			byBound[b.GetUpperBound()] += b.GetCumulativeCount()
		}
	}
	byBound[math.Inf(1)] = h.Count
	for b := range byBound {
		h.Bounds = append(h.Bounds, b)
	}
	sort.Float64s(h.Bounds)
	for _, b := range h.Bounds {
		h.Counts = append(h.Counts, byBound[b])
	}
	return h, nil
}

// Since is what was observed between prev and h (same buckets; a reset
// counter, e.g. a restarted process, gives h itself).
func (h Histogram) Since(prev Histogram) Histogram {
	if len(prev.Bounds) != len(h.Bounds) || prev.Count > h.Count {
		return h
	}
	d := Histogram{Bounds: h.Bounds, Count: h.Count - prev.Count, Counts: make([]uint64, len(h.Counts))}
	for i := range h.Counts {
		if h.Counts[i] < prev.Counts[i] {
			return h
		}
		d.Counts[i] = h.Counts[i] - prev.Counts[i]
	}
	return d
}

// Quantile estimates the q-quantile as Prometheus' histogram_quantile
// does: linear within the bucket that holds it; a quantile in the +Inf
// bucket is the highest finite bound. False when nothing was observed.
func (h Histogram) Quantile(q float64) (float64, bool) {
	if h.Count == 0 || len(h.Bounds) == 0 {
		return 0, false
	}
	rank := q * float64(h.Count)
	i := sort.Search(len(h.Counts), func(i int) bool { return float64(h.Counts[i]) >= rank })
	if i >= len(h.Bounds) {
		i = len(h.Bounds) - 1
	}
	if math.IsInf(h.Bounds[i], 1) {
		if i == 0 {
			return 0, false
		}
		return h.Bounds[i-1], true
	}
	lo, below := 0.0, uint64(0)
	if i > 0 {
		lo, below = h.Bounds[i-1], h.Counts[i-1]
	}
	in := h.Counts[i] - below
	if in == 0 {
		return h.Bounds[i], true
	}
	return lo + (h.Bounds[i]-lo)*(rank-float64(below))/float64(in), true
}

// Slope is the least-squares slope of ys over xs (their units: y per x);
// false with fewer than two points or all xs equal.
func Slope(xs, ys []float64) (float64, bool) {
	n := float64(len(xs))
	if len(xs) < 2 || len(xs) != len(ys) {
		return 0, false
	}
	var sx, sy float64
	for i := range xs {
		sx, sy = sx+xs[i], sy+ys[i]
	}
	mx, my := sx/n, sy/n
	var sxy, sxx float64
	for i := range xs {
		dx := xs[i] - mx
		sxy += dx * (ys[i] - my)
		sxx += dx * dx
	}
	if sxx == 0 {
		return 0, false
	}
	return sxy / sxx, true
}
