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

// replaceForeign runs steps 1 and 2 for a foreign table: write, given
// a plan, renders the whole ruleset into the plan's table. The caller
// then runs step 3 (a full sync of its own table) and 4
// (closeHandover). A failure leaves a table the next full sync can start
// from: the foreign one (step 1), or the handover table serving beside
// ours unreachable (step 3).
func replaceForeign(ctx context.Context, conn Conn, fam ruleset.Family, names []proxier.ServicePortName, foreign TableObjects, write func(chunkPlan) error) error {
	klog.InfoS("Replacing a kube-proxy table another program created, through a handover table",
		"family", fam, "table", TableName, "chains", len(foreign.Chains), "sets", len(foreign.Sets), "handover", HandoverTable)
	_, exists, err := conn.ListObjects(ctx, fam, HandoverTable)
	if err != nil {
		return fmt.Errorf("listing table %s %s: %w", fam, HandoverTable, err)
	}
	if err := write(chunkPlan{names: names, table: HandoverTable, recreate: exists}); err != nil {
		return fmt.Errorf("handover table %s %s: %w", fam, HandoverTable, err)
	}
	tx := ruleset.NewTransaction(fam, TableName)
	tx.DeleteTable()
	if err := conn.Run(ctx, tx); err != nil {
		return fmt.Errorf("deleting the foreign table %s %s: %w", fam, TableName, err)
	}
	return nil
}

// closeHandover is step 4, and removes a handover table a previous
// daemon left. A failure is logged: the next full sync tries again.
func closeHandover(ctx context.Context, conn Conn, fam ruleset.Family) {
	existed, err := cleanupTable(ctx, conn, fam, HandoverTable)
	if err != nil {
		klog.ErrorS(err, "Failed to delete the handover table; the next full sync retries", "family", fam)
		return
	}
	if existed {
		klog.InfoS("Deleted the handover table", "family", fam, "table", HandoverTable)
	}
}
