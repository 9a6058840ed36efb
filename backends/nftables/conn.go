package nftables

import (
	"context"

	"github.com/switchyard-proxy/switchyard/backends/nftables/ruleset"
)

// Conn is the backend's only way to the kernel: commit a transaction on
// one table atomically, and list what a table holds. The netlink
// implementation is NewNetlinkConn; backends/nftables/nftablestest has a strict
// stateful fake. The reading methods may be called concurrently.
type Conn interface {
	// Run commits the transaction: all of it or, on error, none. What
	// Append staged before it on the same table is part of it.
	Run(ctx context.Context, tx *ruleset.Transaction) error
	// Append stages a transaction's operations for the next Run on the
	// same table, which commits them with its own as one transaction;
	// nothing reaches the kernel before. A conn may encode and drop a
	// disposable transaction's payload at once, so that one big
	// transaction is never held rendered whole. On error nothing stays
	// staged.
	Append(ctx context.Context, tx *ruleset.Transaction) error
	// Discard drops whatever Append staged.
	Discard()
	// ListObjects names the chains and sets of a table; exists is false
	// (with no error) when the table is missing.
	ListObjects(ctx context.Context, f ruleset.Family, table string) (objs TableObjects, exists bool, err error)
	// ReadElements hands every element of a set to fn, decoded for the
	// set s describes, with its tag; an interval's start and end come as
	// one element, as written. fn must not keep the element.
	ReadElements(ctx context.Context, f ruleset.Family, table string, s *ruleset.Set, fn func(*ruleset.Element)) error
	// Counts gives the number of rules of each chain and of elements of
	// each set of a table, to check it against what was written.
	Counts(ctx context.Context, f ruleset.Family, table string) (TableCounts, error)
	// Generation is the ruleset's generation: it changes with every
	// committed transaction, from any program.
	Generation(ctx context.Context) (uint32, error)
}

// TableObjects names what a table holds.
type TableObjects struct {
	Chains []string
	Sets   []string
	// Foreign is set when another program created the table: it carries
	// userdata (kube-proxy's has the comment "rules for kube-proxy"),
	// which switchyard's tables never do.
	Foreign bool
}

// TableCounts counts rules per chain and elements per set. An interval
// element counts once.
type TableCounts struct {
	Rules    map[string]int
	Elements map[string]int
}
