package heap

import (
	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/txn"
	"github.com/vacuumops/vacuum-operator/internal/engine/wal"
)

// RemovedXmax is, for a prune or vacuum record of block i of rec (wal.RmgrHeap,
// InfoPrune, InfoVacuum or InfoVacuumVisible), the largest deleting xid among the tuples the record removes
// from p, the block's content before the record is applied: a hot standby's snapshot whose
// Xmin is at or below it may still see one of them, so replay must wait for it or cancel
// it first (PostgreSQL's snapshotConflictHorizon). ok is false for any other record, and
// the xid is InvalidXID when the record removes no tuple with storage (dead line pointers
// only) or p is new.
func RemovedXmax(rec *wal.Record, i int, p page.Page) (_ txn.XID, ok bool) {
	if rec.Rmgr != wal.RmgrHeap || (rec.Info != InfoPrune && rec.Info != InfoVacuum && rec.Info != InfoVacuumVisible) || i < 0 || i >= len(rec.Blocks) {
		return txn.InvalidXID, false
	}
	if rec.Info == InfoVacuumVisible && i != 0 {
		return txn.InvalidXID, false // the VM page
	}
	var offs []page.OffsetNumber
	var err error
	if rec.Info == InfoPrune {
		_, offs, err = decodePrune(rec.Blocks[i].Data)
	} else {
		offs, err = decodeOffsets(rec.Info, rec.Blocks[i].Data)
	}
	if err != nil || p.IsNew() {
		return txn.InvalidXID, true
	}
	var horizon txn.XID
	for _, off := range offs {
		if int(off) > p.NumItems() || p.Item(off).State != page.LPNormal {
			continue
		}
		h, _, err := DecodeTuple(p.ItemData(off))
		if err != nil {
			continue
		}
		if h.Xmax.IsNormal() {
			horizon = max(horizon, h.Xmax)
		}
		if h.Xmin.IsNormal() {
			// An aborted insert is removed too; no snapshot sees it, but its xmin
			// bounds it from above all the same.
			horizon = max(horizon, h.Xmin)
		}
	}
	return horizon, true
}
