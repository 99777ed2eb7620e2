package vacuum

import "github.com/vacuumops/vacuum-operator/internal/engine/txn"

// Position is how far a table's lazy vacuum has got, as it records it
// (Table.SavePosition) at the end of every completed dead-items cycle
// (heap scan up to Block, index pass, heap reclaim) and when it is stopped:
// every heap block below Block is finished (no dead slot that was dead at
// Horizon is left on it), so a vacuum started with Options.Resume scans
// from Block on, with a fresh horizon.
//
// With several heap workers the position is still recorded only once the
// whole cycle is done, so it is the lowest block no worker has left
// unfinished; a stop in the middle of a heap pass records the first block
// of the dead-items store, which no worker may have finished yet.
type Position struct {
	Block   uint32  // the next block to scan: every block below it is done
	Blocks  uint32  // the heap's blocks when the vacuum that recorded it started
	Horizon txn.XID // the cutoff that vacuum used (OldestXmin at its start)
	// Finished: that vacuum ran to its end (Block == Blocks). A resume
	// has nothing left to do on the table; a vacuum without resume starts
	// again from block 0.
	Finished bool
}

// SavedPosition is what Table.SavedPosition found.
type SavedPosition struct {
	Position
	// Found: a position was recorded for the table's present relfilenode
	// and can be trusted.
	Found bool
	// Untrusted says why a recorded position was not used ("" when none
	// was recorded or it was used): unreadable, recorded for another
	// relfilenode, or recorded after a WAL position the log no longer
	// reaches (a crash lost what it claimed).
	Untrusted string
}
