package proxier

import (
	"k8s.io/klog/v2"
)

// skipTally counts what the conversion of one object skipped, so that a
// malformed object (a Service with hundreds of bad ports, a slice of
// 1,000 bad addresses from a buggy controller) gives one log line at the
// default verbosity, not one per field. The details of each skipped field
// are logged at -v=2. Every skipped item still reaches the InvalidFunc
// (switchyard_invalid_objects_total{kind,reason}).
type skipTally struct {
	next   InvalidFunc
	counts map[string]int // "kind/reason" -> items skipped
}

func newSkipTally(next InvalidFunc) *skipTally {
	if next == nil {
		next = func(string, string) {}
	}
	return &skipTally{next: next}
}

// record is the InvalidFunc handed to the conversion helpers.
func (s *skipTally) record(kind, reason string) {
	if s.counts == nil {
		s.counts = map[string]int{}
	}
	s.counts[kind+"/"+reason]++
	s.next(kind, reason)
}

// log writes the one summary line of an object, if anything was skipped.
func (s *skipTally) log(msg string, obj klog.KMetadata) {
	if len(s.counts) == 0 {
		return
	}
	klog.InfoS(msg, "object", klog.KObj(obj), "skipped", s.counts)
}
