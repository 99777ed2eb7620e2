package engine

import (
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine/wal"
)

// Spread checkpoints. A checkpoint the engine starts by itself writes the
// buffers that were dirty when it began at the pace of the WAL and time that
// follow, as PostgreSQL's checkpointer does with checkpoint_completion_target,
// and asks the kernel to write back what it wrote every checkpointFlushAfter
// pages (checkpoint_flush_after), so that neither its writes nor the fsync at
// its end come in one burst: a checkpoint of the 64 MiB default written at
// once, and its fsync of 30-45 ms, held every statement of a light foreground
// up 2-9 ms on a 2-core machine (docs/benchmarks/online-cost.md, "Checkpoints,
// not the VACUUM"). An immediate checkpoint (Checkpoint, Close, the end of
// recovery) is not paced, and one asked for while a spread one runs makes it
// finish at full speed.

const (
	// checkpointCompletion is the share of the checkpoint distance
	// (CheckpointWALBytes of WAL) or of Options.CheckpointSpread by which a
	// spread checkpoint means to have written its buffers: PostgreSQL's
	// checkpoint_completion_target default.
	checkpointCompletion = 0.9
	// checkpointFlushAfter is how many pages a spread checkpoint writes between
	// two requests to start writeback: 256 KiB, PostgreSQL's checkpoint_flush_after
	// on Linux.
	checkpointFlushAfter = 32
	// checkpointNap is how long a spread checkpoint ahead of its schedule sleeps
	// before it writes its next buffer.
	checkpointNap = 10 * time.Millisecond
)

// checkpointPace paces one spread checkpoint's buffer writes.
type checkpointPace struct {
	db      *DB
	redo    wal.LSN
	start   time.Time
	written int  // pages since the last writeback request
	warned  bool // a failed writeback request was logged
}

func (db *DB) newCheckpointPace(redo wal.LSN) *checkpointPace {
	return &checkpointPace{db: db, redo: redo, start: time.Now()}
}

// pace is called after each of the total buffers with done of them written
// (buffer.Pool.FlushAllPaced). The caller holds db.mu shared, which pace lets
// go of while it sleeps, so that DDL is not held up for the whole checkpoint.
func (c *checkpointPace) pace(done, total int) error {
	c.written++
	if c.written >= checkpointFlushAfter || done == total {
		c.written = 0
		if err := c.db.st.StartWriteback(); err != nil && !c.warned {
			// Only a request: the SyncAll that follows is what makes the
			// writes durable, and it fails the checkpoint if they cannot be.
			c.warned = true
			c.db.opts.Logf("checkpoint: %v (the checkpoint goes on; its fsync decides)", err)
		}
	}
	if done == total {
		return nil
	}
	for !c.hurried() && c.ahead(done, total) {
		c.db.mu.RUnlock()
		select {
		case <-time.After(checkpointNap):
		case <-c.db.stop:
		}
		c.db.mu.RLock()
	}
	return nil
}

// hurried: an immediate checkpoint waits, or the database is closing.
func (c *checkpointPace) hurried() bool {
	if c.db.ckptHurry.Load() > 0 {
		return true
	}
	select {
	case <-c.db.stop:
		return true
	default:
		return false
	}
}

// ahead reports whether done of total buffers are more than the schedule
// asks for now: the share written, times checkpointCompletion, against the
// share of the checkpoint distance written to the WAL since the redo point
// and the share of CheckpointSpread elapsed (PostgreSQL's
// IsCheckpointOnSchedule).
func (c *checkpointPace) ahead(done, total int) bool {
	progress := checkpointCompletion * float64(done) / float64(total)
	if d := c.db.opts.CheckpointWALBytes; d > 0 {
		if w := float64(c.db.log.InsertLSN()-c.redo) / float64(d); progress < w {
			return false
		}
	}
	return progress >= time.Since(c.start).Seconds()/c.db.opts.CheckpointSpread.Seconds()
}
