package vacuum

// ReadAheadBlocks is how many blocks the heap passes' read-ahead has read
// in this process, and ReadAheadRunning how many of its goroutines run.
func ReadAheadBlocks() int64 { return readAheadTotal.Load() }

// ReadAheadRunning is how many read-ahead goroutines are running.
func ReadAheadRunning() int64 { return readAheadRunning.Load() }
