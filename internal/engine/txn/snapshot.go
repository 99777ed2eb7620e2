package txn

import "slices"

// Snapshot decides which transactions' effects a reader sees. It is
// immutable once taken and may be shared by goroutines.
type Snapshot struct {
	// Current is the transaction that owns the snapshot (InvalidXID for
	// none): its own changes are visible to it.
	Current XID
	// Xmin: every xid below it had finished when the snapshot was taken.
	Xmin XID
	// Xmax: every xid at or above it had not started.
	Xmax XID
	// XIP lists, sorted, the xids in [Xmin, Xmax) that were active
	// (other than Current).
	XIP []XID
}

// IsCurrent reports whether x is the snapshot's own transaction.
func (s *Snapshot) IsCurrent(x XID) bool { return x != InvalidXID && x == s.Current }

// InProgress reports whether x counts as still running for this snapshot
// (started after it, or active when it was taken), whatever the clog says
// now. The snapshot's own xid is not "in progress" for it; use IsCurrent.
func (s *Snapshot) InProgress(x XID) bool {
	if s.IsCurrent(x) {
		return false
	}
	if x >= s.Xmax {
		return true
	}
	if x < s.Xmin {
		return false
	}
	_, found := slices.BinarySearch(s.XIP, x)
	return found
}

// XidVisible reports whether the effects of x are visible to the snapshot:
// x is the snapshot's own transaction, or it committed (per m) and was not
// in progress when the snapshot was taken. FrozenXID and BootstrapXID are
// always visible.
func (s *Snapshot) XidVisible(m *Manager, x XID) bool {
	if s.IsCurrent(x) {
		return true
	}
	if x == InvalidXID || s.InProgress(x) {
		return false
	}
	return m.Status(x) == Committed
}
