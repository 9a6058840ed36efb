package nftables

import (
	"context"
	"fmt"

	"k8s.io/klog/v2"

	"github.com/switchyard-proxy/switchyard/backends/nftables/ruleset"
	"github.com/switchyard-proxy/switchyard/proxier"
)

// HandoverTable holds a copy of switchyard's rules while a kube-proxy
// table another program created (kube-proxy's own nftables mode) is
// replaced. Its sets may share our names with other types, so that table
// must be deleted and ours created in its place; the handover table
// serves meanwhile, so no packet finds neither:
//  1. the whole ruleset goes into this table, beside the foreign one,
//     in chunks with its hooked chains last (as a first sync's);
//  2. the foreign table is deleted; this one translates everything;
//  3. ours is written in chunks, hooked chains last;
//  4. this table is deleted.
//
// The sets of a table created in a transaction do not answer lookups for
// a moment after the commit that makes their rules live (measured at 10k
// services: ~180 ms of NodePort connections refused when one transaction
// replaced the foreign table with ours): here every commit that makes a
// table live finds its sets made by earlier ones, and another table
// complete and live beside it. A handover table left by a daemon that
// died between the steps is deleted by the next full sync.
const HandoverTable = "kube-proxy-handover"

// replaceForeign runs steps 1-4 for a foreign table. A failure leaves a
// table the next full sync can start from: the foreign one (step 1), or
// the handover table serving beside ours unreachable (step 3).
func (f *familySync) replaceForeign(ctx context.Context, conn Conn, st *proxier.State, names []proxier.ServicePortName, foreign TableObjects) (syncResult, error) {
	klog.InfoS("Replacing a kube-proxy table another program created, through a handover table",
		"family", f.fc.nft, "table", TableName, "chains", len(foreign.Chains), "sets", len(foreign.Sets), "handover", HandoverTable)
	_, exists, err := conn.ListObjects(ctx, f.fc.nft, HandoverTable)
	if err != nil {
		return syncResult{full: true}, fmt.Errorf("listing table %s %s: %w", f.fc.nft, HandoverTable, err)
	}
	if _, err := f.writeChunked(ctx, conn, st, chunkPlan{names: names, table: HandoverTable, recreate: exists}); err != nil {
		return syncResult{full: true}, fmt.Errorf("handover table %s %s: %w", f.fc.nft, HandoverTable, err)
	}
	tx := ruleset.NewTransaction(f.fc.nft, TableName)
	tx.DeleteTable()
	if err := conn.Run(ctx, tx); err != nil {
		return syncResult{full: true}, fmt.Errorf("deleting the foreign table %s %s: %w", f.fc.nft, TableName, err)
	}
	return f.fullChunked(ctx, conn, st, chunkPlan{names: names})
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
