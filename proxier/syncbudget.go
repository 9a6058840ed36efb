package proxier

import "time"

// syncBudget is a token bucket of sync time: wall time earns credit at
// share seconds per second, a sync spends its duration, and a sync may
// start while the credit is not negative. Over any span T syncs take at
// most limit + share*T plus what the last one overran, so a quiet node has limit in hand for a few
// changes in a row (each applied at once) and a node under steady churn
// settles at share of one core with syncs spaced out by what they cost.
// The debt is capped at floor, so one very long sync (the first full one
// at 10k services) does not hold back the changes that follow it for
// longer than floor/share.
type syncBudget struct {
	share  float64
	limit  time.Duration
	floor  time.Duration // the deepest debt, negative
	credit time.Duration
	at     time.Time // when credit was last brought up to date
}

func newSyncBudget(share float64, window, maxWait time.Duration) syncBudget {
	limit := time.Duration(share * float64(window))
	return syncBudget{share: share, limit: limit, floor: -time.Duration(share * float64(maxWait)), credit: limit}
}

// refill adds what the time since the last update earned.
func (b *syncBudget) refill(now time.Time) {
	if !b.at.IsZero() && now.After(b.at) {
		b.credit += time.Duration(b.share * float64(now.Sub(b.at)))
	}
	b.credit = min(b.credit, b.limit)
	b.at = now
}

// spend charges a sync that ran from start to end. While it ran, the
// credit earned share and lost all of each second: it sinks by (1-share)
// of the duration, so a full bucket loses nothing to its cap.
func (b *syncBudget) spend(start, end time.Time) {
	b.refill(start)
	d := end.Sub(start)
	b.credit = max(b.credit-time.Duration((1-b.share)*float64(d)), b.floor)
	b.at = later(b.at, end)
}

// readyAt is when the credit is back to zero (now or earlier if it is
// not negative).
func (b *syncBudget) readyAt(now time.Time) time.Time {
	b.refill(now)
	if b.credit >= 0 {
		return now
	}
	return now.Add(time.Duration(float64(-b.credit) / b.share))
}
