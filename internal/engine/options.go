package engine

import (
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/vfs"
	"github.com/vacuumops/vacuum-operator/internal/engine/wal"
)

// Defaults of Options' zero fields.
const (
	DefaultBufferPoolBytes    = 128 << 20
	DefaultCheckpointWALBytes = 64 << 20
	DefaultCheckpointSpread   = 30 * time.Second
	minPoolFrames             = 16
)

// Options configure Init and Open. The zero value is usable.
type Options struct {
	// FS is the file system (nil = the operating system's).
	FS vfs.FS
	// BufferPoolBytes sizes the shared buffer pool (0 = 128 MiB; at least
	// 16 pages).
	BufferPoolBytes int64
	// Direct opens relation files with O_DIRECT (falls back with a warning
	// where the file system refuses it).
	Direct bool
	// SegmentSize is the relation segment file size (0 = 1 GiB). Every
	// opener of a directory must use the same value.
	SegmentSize int64
	// WALSegmentSize is the WAL segment file size (0 = 16 MiB). Every
	// opener of a directory must use the same value.
	WALSegmentSize int64
	// CheckpointWALBytes triggers an automatic checkpoint once this much
	// WAL has been written since the last one began (0 = 64 MiB, < 0 = never).
	CheckpointWALBytes int64
	// CheckpointSpread is the longest a checkpoint the engine starts by itself
	// spreads its buffer writes over when little WAL follows it (0 = 30 s,
	// < 0 = none: every checkpoint writes at once). With WAL coming, it
	// finishes its writes by the time 0.9 of CheckpointWALBytes more was
	// written (spread.go); Checkpoint and Close are never spread.
	CheckpointSpread time.Duration
	// LockTimeout is how long Open waits for another holder of the data
	// directory to let go (0 = fail at once with ErrInUse).
	LockTimeout time.Duration
	// Logf receives operational messages (recovery, warnings); nil = discard.
	Logf func(format string, args ...any)
	// LogCheckpoints logs each checkpoint's start with its cause and its end
	// with the buffers it wrote and its phases' times through Logf, as
	// PostgreSQL's log_checkpoints (on by default since 15) does. The engine
	// server sets it; the runner's commands, which log to a user's terminal,
	// do not.
	LogCheckpoints bool
	// Opener names this opener in the control file (at most
	// wal.MaxOpenerLen bytes), so the next opener knows who had the
	// directory last: a runner records its run and attempt there.
	Opener string
	// AllowRecovery, when set, is asked before Open replays the WAL of a
	// directory that was not shut down cleanly, with the opener the
	// control file names ("" for a directory written before openers were
	// recorded); false makes Open fail with ErrRecoveryRefused without
	// changing anything. Nil allows recovery.
	AllowRecovery func(lastOpener string) bool
	// Standby opens the directory as a hot standby (OpenStandby): replay of
	// the WAL it is sent goes on while it serves reads, and every write is
	// refused with ErrReadOnly.
	Standby bool
	// MaxStandbyStreamingDelay is how long a standby's replay waits for
	// the reads a record would remove rows from under (a vacuum's prune on
	// the primary) before it cancels them with ErrStandbyConflict, as
	// PostgreSQL's max_standby_streaming_delay (0 = 30 s, < 0 = wait as long
	// as they run).
	MaxStandbyStreamingDelay time.Duration
}

func (o Options) withDefaults() Options {
	if o.FS == nil {
		o.FS = vfs.NewOS(o.Logf)
	}
	if o.BufferPoolBytes <= 0 {
		o.BufferPoolBytes = DefaultBufferPoolBytes
	}
	if o.CheckpointWALBytes == 0 {
		o.CheckpointWALBytes = DefaultCheckpointWALBytes
	}
	if o.CheckpointSpread == 0 {
		o.CheckpointSpread = DefaultCheckpointSpread
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	return o
}

func (o Options) frames() int {
	return max(int(o.BufferPoolBytes/page.Size), minPoolFrames)
}

// walOptions are the WAL options every Open of the log uses: the segment
// size, and as many spare segments kept at checkpoints as two checkpoint
// distances of WAL (wal.SpareSegmentsFor).
func (db *DB) walOptions() wal.Options {
	return wal.Options{SegmentSize: db.opts.WALSegmentSize, Logf: db.opts.Logf,
		RecycleSegments: wal.SpareSegmentsFor(db.opts.CheckpointWALBytes, db.opts.WALSegmentSize)}
}
