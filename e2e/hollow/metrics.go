package hollow

import (
	"fmt"
	"strings"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// parseWatchTotals reads, from the apiserver's /metrics, the bytes and
// events it has sent on watches so far over every resource
// (apiserver_watch_events_sizes' sum and apiserver_watch_events_total).
func parseWatchTotals(text string) (watchTotals, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		return watchTotals{}, fmt.Errorf("parse metrics: %w", err)
	}
	sizes, ok := families["apiserver_watch_events_sizes"]
	if !ok {
		return watchTotals{}, fmt.Errorf("no apiserver_watch_events_sizes")
	}
	var w watchTotals
	for _, m := range sizes.GetMetric() {
		w.bytes += m.GetHistogram().GetSampleSum()
	}
	if total, ok := families["apiserver_watch_events_total"]; ok {
		for _, m := range total.GetMetric() {
			w.events += m.GetCounter().GetValue()
		}
	}
	return w, nil
}

// watchTotals is what the apiserver has sent on watches so far.
type watchTotals struct{ bytes, events float64 }
