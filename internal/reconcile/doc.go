// Package reconcile is the reconcile policy every proxy mode shares.
//
// A mode writes only what a sync's Diff names, so state someone else
// changed (a flushed chain, a deleted table, set or virtual server, a
// firewall reload) stays broken until the mode looks. Every mode looks the
// same way: a periodic sync (Diff.Verify) and, since changes that keep
// arriving postpone the periodic sync, any sync once the last check is
// older than the verify interval, first checks that the kernel holds what
// the mode last wrote (Cadence), and a difference is repaired by the same
// sync and counted in switchyard_rules_repaired_total{mode,kind,ip_family}
// (Repairs). What a check reads and how a difference is repaired is each
// mode's own: its fingerprint, damage check, render and apply.
package reconcile
