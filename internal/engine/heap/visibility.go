package heap

import (
	"github.com/vacuumops/vacuum-operator/internal/engine/buffer"
	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/txn"
)

// xminStatus returns the inserter's status and the hint bit to set, using
// the hint bits when present.
func (r *Rel) xminStatus(h *TupleHeader) (txn.Status, uint16) {
	switch {
	case h.Infomask&XminCommitted != 0:
		return txn.Committed, 0
	case h.Infomask&XminInvalid != 0:
		return txn.Aborted, 0
	}
	switch st := r.d.Txns.Status(h.Xmin); st {
	case txn.Committed:
		return st, XminCommitted
	case txn.Aborted:
		return st, XminInvalid
	default:
		return st, 0
	}
}

// xmaxStatus is xminStatus for the deleter; a tuple with no xmax reports
// Aborted (nobody deleted it).
func (r *Rel) xmaxStatus(h *TupleHeader) (txn.Status, uint16) {
	switch {
	case h.Xmax == txn.InvalidXID || h.Infomask&XmaxInvalid != 0:
		return txn.Aborted, 0
	case h.Infomask&XmaxCommitted != 0:
		return txn.Committed, 0
	}
	switch st := r.d.Txns.Status(h.Xmax); st {
	case txn.Committed:
		return st, XmaxCommitted
	case txn.Aborted:
		return st, XmaxInvalid
	default:
		return st, 0
	}
}

// Visible reports whether the tuple with header h is visible to snap
// (HeapTupleSatisfiesMVCC), and the hint bits the caller may set.
func (r *Rel) Visible(h *TupleHeader, snap *txn.Snapshot) (bool, uint16) {
	var hints uint16
	if snap.IsCurrent(h.Xmin) {
		// Own insert: visible unless deleted by ourselves.
		return !snap.IsCurrent(h.Xmax) || h.Infomask&XmaxInvalid != 0, 0
	}
	st, hint := r.xminStatus(h)
	hints |= hint
	if st != txn.Committed || snap.InProgress(h.Xmin) {
		return false, hints
	}
	if h.Xmax == txn.InvalidXID || h.Infomask&XmaxInvalid != 0 {
		return true, hints
	}
	if snap.IsCurrent(h.Xmax) {
		return false, hints
	}
	st, hint = r.xmaxStatus(h)
	hints |= hint
	if st != txn.Committed {
		return true, hints // deleter running or aborted
	}
	return snap.InProgress(h.Xmax), hints
}

// VacuumStatus classifies a tuple against a horizon (HTSV_Result).
type VacuumStatus int

// Vacuum classifications.
const (
	Live             VacuumStatus = iota // inserted, committed, not deleted
	Dead                                 // invisible to everyone: removable
	RecentlyDead                         // deleted, but some snapshot may still see it
	InsertInProgress                     // inserter still running
	DeleteInProgress                     // deleter still running
)

// String names the classification.
func (v VacuumStatus) String() string {
	return [...]string{"live", "dead", "recently dead", "insert in progress", "delete in progress"}[v]
}

// SatisfiesVacuum classifies a tuple against horizon (txn.Manager's
// OldestXmin): Dead when its inserter aborted or its deleter committed
// below the horizon (HeapTupleSatisfiesVacuum). It also returns the hint
// bits the caller may set.
func (r *Rel) SatisfiesVacuum(h *TupleHeader, horizon txn.XID) (VacuumStatus, uint16) {
	var hints uint16
	st, hint := r.xminStatus(h)
	hints |= hint
	switch st {
	case txn.Aborted:
		return Dead, hints
	case txn.InProgress:
		if h.HasXmax() && h.Xmax == h.Xmin {
			return DeleteInProgress, hints
		}
		return InsertInProgress, hints
	}
	if !h.HasXmax() {
		return Live, hints
	}
	st, hint = r.xmaxStatus(h)
	hints |= hint
	switch st {
	case txn.Aborted:
		return Live, hints
	case txn.InProgress:
		return DeleteInProgress, hints
	}
	if h.Xmax >= horizon {
		return RecentlyDead, hints
	}
	return Dead, hints
}

// visibleToAll reports whether a Live tuple is visible to every snapshot
// now and later (its inserter committed below the horizon).
func visibleToAll(h *TupleHeader, st VacuumStatus, horizon txn.XID) bool {
	return st == Live && h.Xmin < horizon
}

// pendingHint is a hint bit found under a share lock, applied later under
// the exclusive lock.
type pendingHint struct {
	off        page.OffsetNumber
	xmin, xmax txn.XID
	bits       uint16
}

// applyHints sets collected hint bits on b's page. The page may have
// changed since they were collected, so each hint is applied only to a
// tuple that still has the same xmin and xmax. b is pinned and unlocked.
func applyHints(b *buffer.Buffer, hints []pendingHint, s *buffer.Strategy) {
	if len(hints) == 0 {
		return
	}
	b.Lock()
	defer b.Unlock()
	p := b.Page()
	changed := false
	for _, hn := range hints {
		item, h, _, err := tupleAt(p, hn.off)
		if err != nil || h.Xmin != hn.xmin || h.Xmax != hn.xmax {
			continue
		}
		if setHints(item, &h, hn.bits) {
			changed = true
		}
	}
	if changed {
		b.MarkDirtyHint(s)
	}
}

// setHints ORs bits into an item's infomask (exclusive lock held) and
// reports whether anything changed. h must be item's header as decoded:
// only the infomask's two bytes are written, since nothing else changes
// (rewriting the whole header cost the unhinted vacuum, which hints every
// tuple in both heap passes, 5 % of its CPU).
func setHints(item []byte, h *TupleHeader, bits uint16) bool {
	if bits == 0 || h.Infomask|bits == h.Infomask {
		return false
	}
	h.Infomask |= bits
	putInfomask(item, h.Infomask)
	return true
}

// Claim is what a tuple version means to a writer of transaction self
// that checks a unique key or changes the row (PostgreSQL's
// SnapshotDirty): ClaimLive holds the key now; ClaimGone does not
// (aborted, or deleted by a committed transaction or by self);
// ClaimPending is being
// inserted or deleted by the running transaction Xid, whose end decides.
type Claim struct {
	State ClaimState
	Xid   txn.XID // the transaction to wait for, with ClaimPending
}

// ClaimState is one of ClaimLive, ClaimGone, ClaimPending.
type ClaimState uint8

// Claim states.
const (
	ClaimLive ClaimState = iota
	ClaimGone
	ClaimPending
)

// ClaimOf classifies the tuple with header h for transaction self.
func (r *Rel) ClaimOf(h *TupleHeader, self txn.XID) Claim {
	if h.Xmin != self {
		switch st, _ := r.xminStatus(h); st {
		case txn.Aborted:
			return Claim{State: ClaimGone}
		case txn.InProgress:
			return Claim{State: ClaimPending, Xid: h.Xmin}
		}
	}
	if h.Xmax == txn.InvalidXID || h.Infomask&XmaxInvalid != 0 {
		return Claim{State: ClaimLive}
	}
	if h.Xmax == self {
		return Claim{State: ClaimGone}
	}
	switch st, _ := r.xmaxStatus(h); st {
	case txn.Committed:
		return Claim{State: ClaimGone}
	case txn.InProgress:
		return Claim{State: ClaimPending, Xid: h.Xmax}
	}
	return Claim{State: ClaimLive}
}
