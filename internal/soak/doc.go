// Package soak is the crash soak: a driver that runs the engine's writer
// workload in a child process, crashes that child again and again (SIGKILL
// at a random moment, or a simulated power loss through vfs/faultfs inside
// the child), and after every crash reopens the data directory and compares
// the whole table, through the heap and through both indexes, with a ledger
// of committed operations kept outside the data directory; Check must be
// clean. The first divergence stops the soak and is reported.
//
// # Processes
//
// The driver (Run) owns the data directory between children. A child
// (ChildMain) opens it, says "ready" on stdout and then runs, until it is
// killed, a writer (random transactions of inserts, updates and deletes,
// one in ten rolled back) and a maintenance goroutine (checkpoints, lazy
// VACUUM and VACUUM FULL at random moments, concurrent with the writer;
// VACUUM FULL excludes the writer's transactions because it moves every
// row). A power-loss child wraps the file system in faultfs and cuts the
// power at its n-th mutating file operation: the files revert to their
// durable contents (unsynced writes lost, page writes torn at 4 KiB) and
// the child exits with ExitPoweredOff. A recovery-only child opens the
// directory and writes nothing, so a crash lands inside crash recovery.
//
// # Ledger
//
// The ledger is a text file, one record a line, appended with O_APPEND and
// never rewritten:
//
//	P <tx> I <id> <grp> <n> <val>   pending insert of transaction <tx>
//	P <tx> U <id> <grp> <n> <val>   pending update (the whole new row)
//	P <tx> D <id>                   pending delete
//	C <tx>                          Commit of <tx> returned nil
//	R <tx> 1|0                      the driver found in-flight <tx> committed (1) or not (0)
//	E <child> <event...>            events (ready, begin/end of maintenance, crash kind)
//
// A child writes a transaction's P lines and fsyncs them before Commit,
// then writes and fsyncs C after Commit returned: every acknowledged
// commit is in the ledger before the child does anything else, and at most
// one transaction (P lines, no C) is in flight at a crash. That one may be
// either committed or not, but all of its operations or none must be
// visible; the driver records which with an R line. Transaction names are
// "<child>.<n>", unique across children. Values contain no spaces. A torn
// last line (no newline) is an unconfirmed record and is ignored.
//
// # Invariants checked after every crash
//
//   - the visible rows of the table are exactly the ledger's committed
//     state, or that state plus the in-flight transaction;
//   - every id is found exactly once through the id index with the right
//     row, a full range scan of each index returns every row exactly once;
//   - engine.Check reports no problem (checksums, layouts, index and
//     visibility-map consistency).
package soak
