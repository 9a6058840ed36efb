// Package ruleset is switchyard's typed model of an nf_tables table: chains
// with their rules, sets and maps with their elements, and the
// transaction operations that change them.
//
// One model serves three consumers, so they cannot drift apart:
//
//   - the nftables backend renders the desired table into it and diffs it
//     against what it installed, producing a Transaction;
//   - Compile turns each rule into the netlink expressions the kernel
//     receives (github.com/google/nftables), register by register;
//   - the strict fake in backends/nftables/nftablestest applies transactions to
//     a Table and dumps it as nft text;
//   - the packet tracer (Table.Trace) walks the same typed rules
//     (Expr.Eval), over the fake's tables for the shared packet-flow table
//     and over a table read back from the kernel for `switchyard explain`.
//
// Text is nft syntax ("nft list table" style). Every rule the backend
// writes can be read back by nft, and all but the session-affinity rule
// (whose map update takes its data from another map lookup, which nft
// 1.0's parser cannot express) can be loaded by `nft -f`.
package ruleset
