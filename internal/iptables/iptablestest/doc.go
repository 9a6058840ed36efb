// Package iptablestest is a strict, stateful fake of runner.Interface and
// a packet tracer over its rules.
//
// Usage in a backend test:
//
//	f := iptablestest.NewFake()
//	backend := iptables.New(iptables.Config{Runner: f, ...})
//	backend.Sync(ctx, state, diff)
//	got := f.Dump(runner.IPv4, "nat")              // canonical iptables-save-like text
//	calls := f.Restores()                           // payloads sent, e.g. for partial syncs
//	f.FailNextRestores(1)                           // the next Restore fails untouched
//	res, err := f.Trace(runner.IPv4, iptablestest.Packet{SrcIP: pod, DstIP: clusterIP,
//		DstPort: 80, NodeIPs: nodeIPs})             // res.Endpoints, res.Masquerade, ...
//
// The fake keeps filter, nat, mangle and raw tables per family with their
// built-in chains. Restore parses iptables-restore syntax (always in
// --noflush mode) and rejects what iptables rejects: unknown chains and
// tables, jumps to chains that do not exist yet, deleting a chain that is
// built in, not empty or still referenced, targets used in the wrong table,
// addresses of the other family, a missing COMMIT. It is stricter than
// iptables where a payload is surely a renderer bug: a chain declared twice
// in one table section is an error. Like iptables-restore each table
// section commits atomically at its COMMIT; a failing section leaves its
// table untouched, sections committed before it stay. Errors are
// *runner.RestoreError naming the offending line.
//
// Rules are kept as written (re-quoted like iptables-save), not
// re-canonicalised: "-d 10.0.0.1" stays so in Dump. Deleting or ensuring a
// rule compares rules the way iptables does for the common spellings
// ("10.0.0.1" equals "10.0.0.1/32"; "-p tcp --dport 80" equals "-p tcp -m
// tcp --dport 80"; long and short option names).
//
// Trace walks the nat and filter chains a NEW connection traverses and
// returns every outcome a random choice could lead to. It only trusts
// matches and targets it models; any other makes Trace fail rather than
// guess.
package iptablestest
