package soak

import (
	"fmt"
	"strings"
	"time"
)

// Figures are what a soak did and found.
type Figures struct {
	Crashes   int // crashes in all: WriterCrashes plus RecoveryOnly
	SIGKILLs  int // children killed with SIGKILL
	PowerLoss int // children cut by a simulated power loss (faultfs)
	// RecoveryOnly counts the crashes of recovery-only children (children
	// that only reopen the directory after a crash); RecoveryCrashes those of
	// them that landed inside crash recovery, before Open returned and the
	// child logged "ready" (both included in Crashes; RecoveryCrashes also
	// in BeforeReady).
	RecoveryOnly, RecoveryCrashes int
	// WriterCrashes counts the crashes of children that wrote (ran the
	// workload). Each is followed by one verification, after the
	// recovery-only child that may follow it, so a soak without problems
	// ends with Verifications equal to WriterCrashes.
	WriterCrashes int
	// Crashes that landed while the named work was running in the child
	// (several may be running at once); BeforeReady: during Open itself.
	DuringLazy, DuringFull, DuringCheckpoint, BeforeReady int
	// PowerLossNotReached: power-loss children that did not reach their
	// cut-off operation in time and were SIGKILLed instead (counted there).
	PowerLossNotReached int

	Commits        int64 // committed transactions in the ledger
	Ops            int64 // operations of committed transactions
	InflightFound  [2]int64
	LedgerTorn     int // crashes that left a torn last ledger line (dropped)
	LazyDone       int // lazy vacuums, VACUUM FULLs and checkpoints that completed
	FullDone       int
	CheckpointDone int

	Verifications int   // reopen + compare + Check rounds
	RowsChecked   int64 // rows compared (heap scan), summed over verifications
	IndexLookups  int64 // id index lookups compared
	PagesChecked  int64 // pages Check verified
	Replayed      int64 // WAL records replayed by the verifier's Open
	Replays       int   // verifications whose Open replayed WAL
	TornTails     int   // verifications whose replay ended at a torn/damaged record
	FinalRows     int   // rows in the table at the end

	Problems []string // divergences found (the soak stops at the first)
	Elapsed  time.Duration
}

// String renders the figures as an aligned report.
func (f *Figures) String() string {
	var b strings.Builder
	w := func(k string, format string, args ...any) {
		fmt.Fprintf(&b, "%-28s %s\n", k+":", fmt.Sprintf(format, args...))
	}
	w("crashes", "%d (SIGKILL %d, power loss %d; %d of writers)", f.Crashes, f.SIGKILLs, f.PowerLoss, f.WriterCrashes)
	w("recovery-only children", "%d crashed, %d of them inside crash recovery (before Open returned)",
		f.RecoveryOnly, f.RecoveryCrashes)
	w("crash landed during", "lazy vacuum %d, VACUUM FULL %d, checkpoint %d, Open %d", f.DuringLazy, f.DuringFull, f.DuringCheckpoint, f.BeforeReady)
	w("power loss not reached", "%d (SIGKILLed instead)", f.PowerLossNotReached)
	w("committed transactions", "%d (%d row operations)", f.Commits, f.Ops)
	w("in-flight at crash", "%d found committed, %d found not committed; %d torn ledger lines dropped", f.InflightFound[1], f.InflightFound[0], f.LedgerTorn)
	w("maintenance completed", "lazy vacuum %d, VACUUM FULL %d, checkpoint %d", f.LazyDone, f.FullDone, f.CheckpointDone)
	w("verifications", "%d (%d replayed WAL: %d records; %d ended at a torn record)", f.Verifications, f.Replays, f.Replayed, f.TornTails)
	w("rows checked", "%d by scan, %d by id-index lookup; %d pages by Check", f.RowsChecked, f.IndexLookups, f.PagesChecked)
	w("rows at the end", "%d", f.FinalRows)
	w("elapsed", "%v", f.Elapsed.Round(time.Second))
	w("problems found", "%d", len(f.Problems))
	for _, p := range f.Problems {
		fmt.Fprintf(&b, "  - %s\n", p)
	}
	return b.String()
}
