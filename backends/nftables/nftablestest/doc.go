// Package testing provides a strict, stateful fake of nf_tables for the
// nftables backend's tests (Fake, which implements nftables.Conn and dumps
// canonical text) and FlowModel, which answers the shared packet-flow
// table of proxier/flowtest by tracing the fake's tables (the tracer
// itself is ruleset.Table.Trace, shared with `switchyard explain`).
package nftablestest
