package synctrace

import (
	"context"
	"time"
)

// Trace is the phases of one sync, in order, each ending at its mark.
type Trace struct {
	now   func() time.Time
	start time.Time
	marks []mark
}

type mark struct {
	phase string
	at    time.Time
}

// New starts a trace at now().
func New(now func() time.Time) *Trace {
	return &Trace{now: now, start: now()}
}

type key struct{}

// With returns ctx carrying t.
func With(ctx context.Context, t *Trace) context.Context {
	return context.WithValue(ctx, key{}, t)
}

// Mark ends phase in the trace ctx carries; without one it does nothing.
// A phase marked twice (a backend syncing two families) adds up.
func Mark(ctx context.Context, phase string) {
	if t, ok := ctx.Value(key{}).(*Trace); ok && t != nil {
		t.Mark(phase)
	}
}

// Mark ends phase now.
func (t *Trace) Mark(phase string) {
	t.marks = append(t.marks, mark{phase: phase, at: t.now()})
}

// Phases gives each phase's duration, in the order first marked; a phase
// marked more than once sums its spans.
func (t *Trace) Phases() ([]string, map[string]time.Duration) {
	var order []string
	d := map[string]time.Duration{}
	prev := t.start
	for _, m := range t.marks {
		if _, seen := d[m.phase]; !seen {
			order = append(order, m.phase)
		}
		d[m.phase] += m.at.Sub(prev)
		prev = m.at
	}
	return order, d
}

// KeysAndValues renders the phases for a structured log line, in
// milliseconds with microsecond precision.
func (t *Trace) KeysAndValues() []any {
	order, d := t.Phases()
	kv := make([]any, 0, 2*len(order))
	for _, p := range order {
		kv = append(kv, p+"Ms", float64(d[p].Microseconds())/1000)
	}
	return kv
}
