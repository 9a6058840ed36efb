package nftables

import (
	"context"
	"fmt"

	"k8s.io/klog/v2"

	"github.com/switchyard-proxy/switchyard/backends/nftables/ruleset"
)

// HandoverTable holds a copy of switchyard's rules while a kube-proxy
// table another program created (kube-proxy's own nftables mode) is
// replaced. Its sets may share our names with other types, so that table
// must be deleted and ours created in its place; but the sets of a table
// created in a transaction do not answer lookups for a moment after the
// commit makes their rules live (measured at 10k services: ~180 ms of
// NodePort connections refused). So the first sync over such a table
// makes before it breaks:
//  1. the whole ruleset goes into this table, beside the foreign one;
//  2. the foreign table is deleted and ours created, in one transaction;
//     a packet our new table does not translate yet is translated here;
//  3. this table is deleted.
//
// A handover table left by a daemon that died between the steps is
// deleted by the next full sync.
const HandoverTable = "kube-proxy-handover"

// openHandover is step 1.
func (f *familySync) openHandover(ctx context.Context, conn Conn, d *desiredTable, foreign TableObjects) error {
	klog.InfoS("Replacing a kube-proxy table another program created, through a handover table",
		"family", f.fc.nft, "table", TableName, "chains", len(foreign.Chains), "sets", len(foreign.Sets), "handover", HandoverTable)
	tx := ruleset.NewTransaction(f.fc.nft, HandoverTable)
	if _, exists, err := conn.ListObjects(ctx, f.fc.nft, HandoverTable); err != nil {
		return fmt.Errorf("listing table %s %s: %w", f.fc.nft, HandoverTable, err)
	} else if exists {
		tx.DeleteTable()
	}
	tx.AddTable()
	d.write(tx)
	if err := conn.Run(ctx, tx); err != nil {
		return fmt.Errorf("handover table %s %s: %w", f.fc.nft, HandoverTable, err)
	}
	return nil
}

// closeHandover is step 3, and removes a handover table a previous
// daemon left. A failure is logged: the next full sync tries again.
func (f *familySync) closeHandover(ctx context.Context, conn Conn) {
	existed, err := cleanupTable(ctx, conn, f.fc.nft, HandoverTable)
	if err != nil {
		klog.ErrorS(err, "Failed to delete the handover table; the next full sync retries", "family", f.fc.nft)
		return
	}
	if existed {
		klog.InfoS("Deleted the handover table", "family", f.fc.nft, "table", HandoverTable)
	}
}
