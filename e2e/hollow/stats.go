package hollow

import (
	"math"
	"slices"
	"time"
)

// percentile is the p-th percentile (0-100) of xs by the nearest rank; 0
// for none.
func percentile(xs []time.Duration, p float64) time.Duration {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	return s[min(max(rank, 1), len(s))-1]
}

// line is y = Intercept + Slope*x.
type line struct{ Intercept, Slope float64 }

// At is the line's value at x.
func (l line) At(x float64) float64 { return l.Intercept + l.Slope*x }

// fitLine is the least-squares line through (xs[i], ys[i]); ok is false
// with fewer than two distinct xs.
func fitLine(xs, ys []float64) (line, bool) {
	n := float64(len(xs))
	if len(xs) != len(ys) || len(xs) < 2 {
		return line{}, false
	}
	var sx, sy, sxx, sxy float64
	for i := range xs {
		sx += xs[i]
		sy += ys[i]
		sxx += xs[i] * xs[i]
		sxy += xs[i] * ys[i]
	}
	d := n*sxx - sx*sx
	if d == 0 {
		return line{}, false
	}
	slope := (n*sxy - sx*sy) / d
	return line{Intercept: (sy - slope*sx) / n, Slope: slope}, true
}
