package txn

import (
	"slices"
)

// Hot standby: a standby's manager assigns no xids. Its transactions only read, with
// InvalidXID as their id, and their snapshots come from replay: every xid replay has seen
// a record of but not yet its commit or abort is running (XIP), so a snapshot never sees
// half of a replayed transaction, and transactions become visible in WAL order (the order
// their commit records are replayed).

// standbyState is the manager's hot-standby part, guarded by Manager.mu.
type standbyState struct {
	on bool
	// running are the xids replay saw a record of and not yet the end of.
	running map[XID]struct{}
	// readers are the open standby transactions.
	readers map[*Txn]struct{}
}

// SetStandby puts the manager in hot-standby mode (before replay starts) or takes it out
// (a promotion, at the next Open).
func (m *Manager) SetStandby(on bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sb.on = on
	if m.sb.running == nil {
		m.sb.running = map[XID]struct{}{}
		m.sb.readers = map[*Txn]struct{}{}
	}
}

// Standby reports whether the manager is in hot-standby mode.
func (m *Manager) Standby() bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.sb.on
}

// NoteReplayXID records that replay applied a record of x: x runs until replay meets its
// commit or abort record (Redo). Outside standby mode it does nothing.
func (m *Manager) NoteReplayXID(x XID) {
	if !x.IsNormal() {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.sb.on || m.clogGetLocked(x) != InProgress {
		return
	}
	m.sb.running[x] = struct{}{}
}

// standbySnapshotLocked is a snapshot of what replay has committed so far.
func (m *Manager) standbySnapshotLocked() *Snapshot {
	snap := &Snapshot{Xmin: m.next, Xmax: m.next, XIP: make([]XID, 0, len(m.sb.running))}
	for x := range m.sb.running {
		if x < m.next {
			snap.XIP = append(snap.XIP, x)
			snap.Xmin = min(snap.Xmin, x)
		}
	}
	slices.Sort(snap.XIP)
	return snap
}

// beginStandbyLocked starts a read-only standby transaction.
func (m *Manager) beginStandbyLocked() *Txn {
	t := &Txn{snap: m.standbySnapshotLocked(), ended: make(chan struct{})}
	m.sb.readers[t] = struct{}{}
	return t
}

// StandbyConflicts returns the open standby transactions whose snapshot may still see a
// row deleted by horizon (their Xmin is at or below it), or every open one when all is
// true (a relation's files are replaced or removed).
func (m *Manager) StandbyConflicts(horizon XID, all bool) []*Txn {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var out []*Txn
	for t := range m.sb.readers {
		if all || t.snap.Xmin <= horizon {
			out = append(out, t)
		}
	}
	return out
}

// Cancel makes t's later operations fail with err (a standby transaction replay had to
// cancel); the first error is kept.
func (t *Txn) Cancel(err error) { t.cancelled.CompareAndSwap(nil, &err) }

// Cancelled is the error Cancel set, nil if none.
func (t *Txn) Cancelled() error {
	if p := t.cancelled.Load(); p != nil {
		return *p
	}
	return nil
}

// Ended is closed when t ends.
func (t *Txn) Ended() <-chan struct{} { return t.ended }
