// Package faultfs is a vfs.FS for tests that wraps another FS (normally
// vfs.OS over t.TempDir()) and adds two kinds of trouble.
//
// # Injected errors
//
// Inject(Rule) fails matching operations: by kind (Op: read, write,
// extend-beyond-size, truncate, sync, syncdir, open, create, rename, remove,
// mkdir), by a substring of the path, after letting the first After matches
// through, Times times or always. Faults: ENOSPC and EIO (an *os.PathError
// wrapping the syscall.Errno, nothing done) and ShortWrite (part of the
// buffer written, io.ErrShortWrite returned). A failed Sync leaves the data
// written before it non-durable.
//
// # Power loss
//
// The FS keeps, per file (an inode: the state follows renames), an undo log
// of every write and truncation since the file's last successful Sync: the
// old bytes it overwrote and the old size. It keeps a journal of directory
// operations (create, remove, rename, mkdir) not yet followed by a SyncDir
// of every directory they touched. PowerLoss(opts):
//
//  1. waits for operations in flight, then closes every file and releases
//     every lock opened through this FS (the process is gone);
//  2. reverts every file to its durable contents by applying its undo log
//     newest first; with opts.TearProb an undone write of two or more whole
//     4 KiB chunks may instead be torn: some chunks keep the new bytes,
//     the others revert (an 8 KiB page keeps exactly one new half);
//  3. undoes the journal newest first: un-synced creations vanish, removed
//     and replaced files come back with their durable contents, renames
//     and mkdirs are reverted;
//  4. makes the FS dead: every later operation returns ErrPoweredOff, so an
//     engine running on it stops. Tests then reopen the directory with a
//     fresh vfs.OS().
//
// CrashAfter(n, opts) cuts the power automatically at the n-th mutating
// operation from now (writes, truncations, syncs, creations, renames,
// removals, mkdirs), which does not happen. Stats, Count and MutatingOps
// report operation counts, so a test can first measure a workload and then
// cut it at a random point.
//
// The model is deliberately pessimistic: nothing un-synced survives (except
// torn halves), which is what a correct engine must tolerate. Every method
// is safe for concurrent use; the power is cut between operations.
package faultfs
