package synctrace

import (
	"context"
	"slices"
	"testing"
	"time"
)

func TestPhases(t *testing.T) {
	at := time.Unix(100, 0)
	step := []time.Duration{0, 2, 5, 6, 10, 11} // ms after start: start, then each mark
	i := 0
	now := func() time.Time { d := step[i]; i++; return at.Add(d * time.Millisecond) }
	tr := New(now)
	ctx := With(context.Background(), tr)
	for _, p := range []string{"snapshot", "render", "commit", "render", "commit"} {
		Mark(ctx, p)
	}
	Mark(context.Background(), "ignored") // no trace: nothing happens
	order, d := tr.Phases()
	if !slices.Equal(order, []string{"snapshot", "render", "commit"}) {
		t.Fatalf("order %v", order)
	}
	want := map[string]time.Duration{"snapshot": 2 * time.Millisecond, "render": 7 * time.Millisecond, "commit": 2 * time.Millisecond}
	for p, w := range want {
		if d[p] != w {
			t.Errorf("%s: %v, want %v", p, d[p], w)
		}
	}
	kv := tr.KeysAndValues()
	if len(kv) != 6 || kv[0] != "snapshotMs" || kv[1] != 2.0 {
		t.Errorf("key-values %v", kv)
	}
}
