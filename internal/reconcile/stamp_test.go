package reconcile

import "testing"

// TestStamp: an empty stamp is never untouched; a recorded counter is
// untouched until it moves; a sync that does not know the kernel, or
// cannot read the counter, drops the record.
func TestStamp(t *testing.T) {
	var s Stamp
	if s.Untouched(0, true) || s.Valid() {
		t.Error("an empty stamp says nobody wrote")
	}
	s.Record(7, true, true)
	if !s.Untouched(7, true) || s.Untouched(8, true) || s.Untouched(7, false) {
		t.Error("a recorded 7 must be untouched at 7 only, and only when read")
	}
	s.Record(9, true, false) // someone else wrote before an unchecked sync
	if s.Valid() || s.Untouched(9, true) {
		t.Error("an unknown kernel was recorded as the mode's own")
	}
	s.Record(9, true, true)
	s.Record(10, false, true) // the counter could not be read
	if s.Valid() {
		t.Error("an unread counter kept the old record")
	}
}
