// Package testing provides a strict, stateful fake of nf_tables for the
// nftables backend's tests (Fake, which implements nftables.Conn and dumps
// canonical text) and a packet tracer over the fake's tables (FlowModel)
// that answers the shared packet-flow table of proxier/flowtest.
package testing
