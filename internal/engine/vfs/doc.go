// Package vfs is the one seam through which the engine touches the file
// system: every open, read, write, fsync, rename, directory sync and lock
// goes through an FS, so tests can substitute package vfs/faultfs to inject
// errors and simulate power loss.
//
// The operating-system implementation (OS, NewOS in os.go):
//
//   - OpenFile with ODirect opens the file normally and then turns O_DIRECT
//     on with fcntl(F_SETFL). A file system that refuses it (EINVAL) keeps
//     the file buffered and logs "O_DIRECT not supported on <fs>, using
//     buffered I/O" once per file system; File.Direct reports what was
//     obtained. With O_DIRECT in effect the caller must pass buffers from
//     AlignedBuffer and offsets and lengths that are multiples of Alignment.
//   - File.Sync is fdatasync(2): data and the file size are durable when it
//     returns nil. An fsync error is reported, never retried: the caller
//     must treat the data written since the last successful Sync as lost.
//   - SyncDir fsyncs a directory, making creations, renames and removals of
//     its entries durable. Until then a crash may undo them.
//   - Lock takes flock(LOCK_EX|LOCK_NB) on a descriptor of its own, so a
//     second Lock of the same file fails with ErrLocked (wrapped, naming the
//     path) whether the holder is another process or this one. Closing the
//     returned io.Closer (or the process exiting) releases it.
//   - FreeBytes is statfs's Bavail*Bsize: the bytes an unprivileged user may
//     still write.
//
// This package owns no on-disk format.
package vfs
