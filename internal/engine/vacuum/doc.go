// Package vacuum is the engine's VACUUM: lazy vacuum (after PostgreSQL's
// vacuumlazy.c; our own code) and VACUUM FULL (a rewrite), both paced by
// one throttle budget per run (package vacuum/throttle), both reporting
// live progress and a VACUUM VERBOSE-style report. It imports only the
// lower engine packages; the engine turns a table into a Target
// (engine/vacuum.go) and calls Batch.Vacuum / Batch.VacuumFull.
//
// # Lazy vacuum
//
// A table's tuples are MVCC versions. A version deleted by a transaction
// that committed below the horizon (txn.Manager.OldestXmin, taken once at
// the start: no snapshot still running can see it) is dead. Removing it
// takes three steps, in this order, and the order is the whole point:
//
//  1. Heap scan (phase "scanning heap"). Blocks are visited in order.
//     A block whose visibility-map bit is set is skipped without being
//     read: every tuple on it is visible to everyone, so it has nothing to
//     remove. The bits are read, and set by both heap passes, with the VM
//     page kept pinned (vm.Reader, one per worker, dropped at the end of
//     each pass): one buffer access per VM page, as PostgreSQL keeps its
//     vmbuffer, rather than a cost-charged hit per heap block. Every other block is classified (heap.ScanForVacuum): the
//     offsets of its dead tuples and of LP_DEAD pointers an earlier
//     interrupted vacuum left go into the dead-TID store (package
//     tidstore), and the page is left unchanged. A block with no dead slot
//     is finished at once: free space recorded in the FSM, VM bit set if
//     every tuple is visible to all. (PostgreSQL prunes here, turning dead
//     tuples into LP_DEAD pointers, and so dirties, writes and images each
//     page twice per vacuum; deferring the whole change to step 3 does it
//     once, halving heap writes and WAL.)
//
//  2. Index pass (phase "vacuuming indexes"). Each index is scanned in
//     physical order (btree.BulkDelete) and every entry whose TID the
//     store contains is deleted. Lookups arrive in key order, that is in
//     random heap order, which is why the store is built for fast random
//     Contains rather than as a sorted array.
//
//  3. Heap vacuum (phase "vacuuming heap"). Only now are the collected
//     slots made LP_UNUSED and the dead tuples' storage reclaimed, in one
//     WAL record per page, the page's free space recorded, and its VM bit
//     set when it qualifies. Tuples are counted as removed here. A page
//     whose LSN is still the one step 1 saw has not changed since (every
//     change but a hint bit is WAL-logged), so step 1's classification
//     stands and the page is not classified again
//     (heap.ReclaimBlockAfterScan, the LSN and "every remaining tuple
//     visible to all" kept beside the store and counted in its memory);
//     a page that did change is re-checked tuple by tuple against the
//     horizon (heap.ReclaimBlock).
//
// Throughout the three steps a goroutine flushes the WAL behind the vacuum
// once lazyWALFlushAfter (1 MiB) of it is unflushed (walFlusher), so that a ring
// reusing a slot whose page the vacuum dirtied usually finds that page's
// WAL durable already instead of waiting for an fdatasync.
//
// Why dead line pointers must stay until the indexes are cleaned: an
// index entry holds a TID (block, offset). If the slot at that offset were
// freed while the entry still existed, a later insert could reuse the
// slot, and the stale entry would then lead index scans to an unrelated
// row: a wrong answer, not merely a wasted fetch. A dead tuple (or an
// LP_DEAD pointer, "nothing lives here, but something may still point
// here") keeps its slot, which an insert never reuses. Hence the heap's
// second pass comes strictly after every index has dropped its entries,
// and a crash or cancellation between the steps is harmless: dead tuples
// and LP_DEAD pointers left behind are found again by the next vacuum's
// first pass and finished then.
//
// Memory: the store is bounded by Options.MaintenanceWorkMem. Before
// scanning a block, if the store could grow past the budget
// (tidstore.Full), steps 2 and 3 run for what it holds, the store is
// emptied, and the scan resumes where it was; each such round is one
// "index pass" in the report. There is no other ceiling (PostgreSQL's old
// 1 GiB cap is gone), and at ~60 tuples a page the store costs under a
// byte per dead TID at 20 % dead, so one pass is the norm. The smallest
// budget (MinMaintenanceWorkMem) is below one store segment, so it holds
// one block at a time: a test device that forces many passes.
//
// A table without indexes takes PostgreSQL's one-pass path: nothing can
// point at its dead slots, so each block is reclaimed right after its scan.
//
// Tuples remaining: counted on every page scanned; the all-visible pages
// skipped hold only live tuples, which are counted on a uniform sample of
// up to SkippedSamplePages of them (reservoir-sampled during the scan, read
// after it) and scaled to all skipped pages, so Report.TuplesRemaining is
// the whole table's (exact when no more pages were skipped than sampled).
//
// After the scan: a final pass for what the store holds; index cleanup
// (phase "cleaning up indexes": the index figures come from the last
// bulk-delete pass, or from one btree.Cleanup scan when there was none);
// then truncation (phase "truncating heap", unless DisableTruncate) of
// the empty pages at the end of the heap. Truncation takes the table's
// exclusive lock (Table.Lock; row operations wait for it) and
// re-checks under it that the pages are still empty, because an insert
// could otherwise land on a page about to disappear.
//
// The horizon is read once: tuples deleted by transactions that commit
// later, or that some snapshot can still see, are "recently dead" and
// stay (reported as not yet removable). Concurrent inserts, updates and
// deletes continue during a lazy vacuum (only truncation blocks them);
// blocks added after the scan began are left for the next vacuum.
//
// # Stopping and resuming
//
// At the end of every completed dead-items cycle (scan up to a block,
// index pass, heap reclaim; for a table without indexes every
// positionEveryBlocks blocks), and when it is stopped (cancelled), a lazy
// vacuum records its Position through Table.SavePosition: the block below
// which every block is finished, the horizon it used. The engine flushes
// the WAL first, then replaces a small file atomically, so a position
// never claims work a crash could undo; it is tied to the heap's
// relfilenode, so TRUNCATE, VACUUM FULL and DROP leave nothing to resume.
// A vacuum with Options.Resume starts its scan at that block with a fresh
// horizon; the work of the cycle the stop interrupted is redone (its
// tuples were not counted as removed, except those already reclaimed,
// whose pages the resumed scan finds all-visible or clean), so the
// invocations of one vacuum remove together exactly what one uninterrupted
// vacuum removes. Pages below the position that are not all-visible (rows
// changed there after the stop, or tuples not yet removable at the earlier
// horizon) are left for the next vacuum without resume
// (Report.PagesLeftBehind). A vacuum
// that finishes records a finished position: a resume skips the table.
//
// # VACUUM FULL
//
// Under the table's exclusive lock for its whole duration: count the old
// heap (exact removed/remaining figures and the space estimate), refuse
// with *NoSpaceError (ErrNoSpace) when the volume lacks room for the new
// heap + new indexes + the WAL they produce, copy every tuple that is not
// dead (live, recently dead, in progress: heap.ScanLiveForRewrite) into a
// new relfilenode with heap.InsertRaw (xmin/xmax kept), collect each
// index's (key, new TID) entries, sort them (in memory up to
// MaintenanceWorkMem per run; beyond it sorted runs spill to unlinked
// temporary files and are merged), build each index bottom-up
// (btree.Build), then Target.Swap: WAL flushed, pool flushed, new files
// fsynced, catalog saved atomically, old files dropped. A crash before the
// catalog save leaves the old table (the new files are orphans the next
// Open removes; their WAL records name relfilenodes the catalog never held
// and are skipped by redo); after it, the new table. Any error before the
// switch (ENOSPC included) drops the new files and leaves the catalog
// untouched.
//
// # One vacuum of a table at a time
//
// The engine keeps a vacuum lock per table: every lazy vacuum and VACUUM
// FULL (DB.Vacuum, DB.VacuumFull, DB.VacuumBatch) takes it before its
// Target is built and holds it until it returns (Table.Release), so a
// lazy vacuum and a FULL, or two vacuums, never work on one table at
// once, and a vacuum that waited sees the relations a FULL left. The second one waits for the lock
// (until its context ends) or, with Options.NoWait, fails at once with
// ErrVacuumInProgress. Row operations do not take this lock.
//
// # Throttling, counters, delay points
//
// Every page access goes through a buffer.Strategy (a vacuum ring of
// RingSize bytes, or none) whose usage.Counters belong to one worker
// goroutine; each worker's counters are a child of its table's, which are
// a child of the run's, so per-worker, per-table and run-wide figures are
// kept in one increment. A worker's throttle.Meter reads its own counters
// at each delay point: once per heap page (scan, heap pass, the pages
// sampled for the tuple estimate, and the counting pass of FULL and of
// MinDeadTuplePercent), once per index page (BulkDelete's pageHook and the
// cleanup scan), once per page read or index page built by FULL. So every
// page's cost is charged where it is incurred, never in one lump later. The delay point samples progress rates, charges the
// usage since the previous one to the table's throttle (a child of the
// run's: overrides apply to the table, and the run's limits to the sum of
// all tables), sleeps if ahead of schedule, and returns ctx's error when
// cancelled, so a cancelled vacuum stops within one page of work plus at
// most one sleep. Every change already made was WAL-logged as it was made;
// stopping between any two pages leaves a consistent table.
//
// # Invariants
//
//   - A line pointer becomes LP_UNUSED only after every index of the table
//     dropped its entries for the TIDs of the current store.
//   - The store holds TIDs of dead tuples and LP_DEAD pointers only, added
//     in block order.
//   - All workers of a Batch share one root throttle; parallel tables and
//     index workers never raise the run's rate above its limits.
//   - Progress counters only grow; a table's phase ends at "done".
//   - VACUUM FULL switches the catalog at most once, after the new files
//     are durable, and never leaves both or neither table.
package vacuum
