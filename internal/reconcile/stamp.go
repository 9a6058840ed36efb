package reconcile

// Stamp is one family's record of the kernel's write counter (the
// nf_tables ruleset generation, which any commit by any program bumps, or
// the legacy iptables tables' entry counts and sizes) as the mode left it
// after its own last successful sync. While the counter still reads the
// same, nobody else wrote, and a check can read nothing more.
//
// The rule every mode follows: a sync records the counter after its
// writes only if it knows the kernel holds what it wrote — it rewrote
// everything, it compared everything, or nobody else had written before
// it began. Otherwise the stamp is dropped, so that the next check
// compares: taking a moved counter as one's own would absorb someone
// else's write (a chain flushed before a sync for an unrelated change
// would then stay unseen).
type Stamp struct {
	value uint64
	valid bool
}

// Untouched reports whether now (read successfully when ok) is still the
// recorded counter: nobody wrote since the mode's last sync.
func (s Stamp) Untouched(now uint64, ok bool) bool {
	return ok && s.valid && now == s.value
}

// Record keeps now as the mode's own when the sync knows what the kernel
// holds (known) and the counter could be read (ok); otherwise it drops
// the stamp.
func (s *Stamp) Record(now uint64, ok, known bool) {
	if !ok || !known {
		*s = Stamp{}
		return
	}
	*s = Stamp{value: now, valid: true}
}

// Valid reports whether there is a record.
func (s Stamp) Valid() bool { return s.valid }
