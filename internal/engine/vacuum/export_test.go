package vacuum

// ReadAheadBlocks is how many blocks the heap passes' read-ahead has read
// in this process, and ReadAheadRunning how many of its goroutines run.
func ReadAheadBlocks() int64 { return readAheadTotal.Load() }

// ReadAheadRunning is how many read-ahead goroutines are running.
func ReadAheadRunning() int64 { return readAheadRunning.Load() }

// IndexReadAheadBlocks is how many of ReadAheadBlocks were index blocks
// read ahead of a bulk delete.
func IndexReadAheadBlocks() int64 { return indexAheadTotal.Load() }

// IndexReadAheadStarts is how many index bulk deletes started a read-ahead.
func IndexReadAheadStarts() int64 { return indexAheadStarts.Load() }

// HeapJobReadAheadBlocks is how many of ReadAheadBlocks the parallel heap
// pass's workers read ahead of their runs of blocks.
func HeapJobReadAheadBlocks() int64 { return heapJobAheadTotal.Load() }

// HeapJobReadAheadStarts is how many read-aheads the parallel heap pass's
// workers started, one for each run of blocks they took.
func HeapJobReadAheadStarts() int64 { return heapJobAheadStarts.Load() }
