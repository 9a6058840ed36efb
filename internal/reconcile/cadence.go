package reconcile

import (
	"time"

	"k8s.io/utils/clock"

	"github.com/switchyard-proxy/switchyard/proxier"
)

// DefaultVerifyInterval is a Cadence's interval when none is given: the
// check interval (proxier.CheckInterval) of kube-proxy's default sync
// period, 30 s. The daemon gives every mode proxier.CheckInterval of the
// mode's own sync period.
const DefaultVerifyInterval = 20 * time.Second

// Cadence decides when a sync first verifies the kernel.
type Cadence struct {
	interval time.Duration // <0: never
	clock    clock.PassiveClock
}

// NewCadence verifies every interval (0: DefaultVerifyInterval; negative:
// never) by the clock (nil: the real one).
func NewCadence(interval time.Duration, c clock.PassiveClock) Cadence {
	if interval == 0 {
		interval = DefaultVerifyInterval
	}
	if c == nil {
		c = clock.RealClock{}
	}
	return Cadence{interval: interval, clock: c}
}

// Due says whether a sync with diff verifies first, given the time of the
// last verification (or full sync, which rewrites everything).
func (c Cadence) Due(diff *proxier.Diff, last time.Time) bool {
	if c.interval < 0 {
		return false
	}
	return diff.Verify || c.clock.Since(last) >= c.interval
}

// Now is the cadence clock's time, to record a verification.
func (c Cadence) Now() time.Time { return c.clock.Now() }

// Interval is the interval in force (negative: never).
func (c Cadence) Interval() time.Duration { return c.interval }
