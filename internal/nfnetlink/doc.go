// Package nfnetlink is switchyard's one home for nf_tables netlink: the
// constants golang.org/x/sys/unix lacks, walking and writing attributes,
// the batch a transaction is committed as, element messages (with the
// userdata the nftables backend tags its elements with), dumps of
// chains, rules, sets and elements, and the ruleset generation. The
// nftables backend (backends/nftables) and the iptables mode on
// iptables-nft (internal/iptables/runner: chain use counts, rule counts,
// the generation as a fingerprint) both go through it; no other package
// parses nf_tables attributes. Messages for tables, chains, rules and
// sets are still built by github.com/google/nftables' public API.
//
// It is independent of the backends' types: keys and data are bytes laid
// out as the registers hold them, families NFPROTO_* values. Sockets are
// opened in the network namespace of the calling thread; callers pin the
// thread.
//
// # Why the batch is written here, not by google/nftables
//
// The nftables backend lets google/nftables build messages, captures them
// through the library's test dial hook (WithTestDial, Batch.Capture) and
// writes the batch itself (Batch, Socket.Commit). Conn.Flush of
// github.com/google/nftables v0.3.0 marshals every message again into a
// buffer grown by append (the encoded batch held three to four times at
// its peak, ~900 MB for a restart at 88k service ports, against ~110 MB
// for this package's batch, mapped outside the Go heap), asks the kernel
// for an acknowledgement of every message and an echo of every rule, and
// reads them one recvmsg at a time.
//
// Checked when this package was made: the Go module proxy serves
// google/nftables v0.2.0 and v0.3.0 only, and go.mod already has v0.3.0.
// In v0.3.0 every message still carries NLM_F_ACK and every new rule
// NLM_F_ECHO, and Flush waits for each acknowledgement: "stop requesting
// ACKs" (google/nftables PR #336) is not released. Its SetElement carries
// only a comment (NFTNL_UDATA_SET_ELEM_COMMENT) as userdata, not the
// backend's tag TLVs (types 0xd0 and 0xd1, backends/nftables/
// netlink_tags.go), on which the backend's read-back of service chains
// relies. So no release can replace the hook (the library could not
// write the same table, so there was no library path to time it
// against), and the hook stays. The hand-written path, BenchmarkKernelFirstSync/10000x10x1 (10k services x
// 10 endpoints, first full sync into an empty namespace, 2 vCPUs shared
// with other work), in alternating runs of 3 syncs each: before this
// package 0.80-1.99 s/op, 74.9-77.2 MB peak RSS, 262.44 MB and 1.806M
// allocations per sync; through it 0.82-1.19 s/op, 73.5-78.3 MB, 262.45
// MB and 1.806M allocations (about 100 more): no change beyond noise.
// Revisit when a release drops the acknowledgements and takes arbitrary
// element userdata.
package nfnetlink
