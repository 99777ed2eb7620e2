package buffer

import "sync"

// numShards is the number of page-table partitions (a power of two).
const numShards = 64

// shard is one partition of the page table, padded to its own cache lines
// so that goroutines working on different shards do not share a line.
type shard struct {
	mu sync.RWMutex
	m  map[Tag]int32
	_  [32]byte
}

// pageTable maps a Tag to the frame holding it.
type pageTable struct {
	shards [numShards]shard
}

func (t *pageTable) init() {
	for i := range t.shards {
		t.shards[i].m = make(map[Tag]int32)
	}
}

// shardIndex hashes a tag to its partition (a 64-bit mix so that
// consecutive blocks of one relation spread over all shards).
func shardIndex(tag Tag) int {
	h := uint64(tag.Rel)<<40 ^ uint64(tag.Fork)<<32 ^ uint64(tag.Block)
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	return int(h & (numShards - 1))
}

func (t *pageTable) shardFor(tag Tag) *shard { return &t.shards[shardIndex(tag)] }

// lockPair write-locks the shards of two tags in index order (once if they
// share a shard) and returns the function that unlocks them.
func (t *pageTable) lockPair(a, b Tag) func() {
	i, j := shardIndex(a), shardIndex(b)
	if i == j {
		t.shards[i].mu.Lock()
		return t.shards[i].mu.Unlock
	}
	if i > j {
		i, j = j, i
	}
	t.shards[i].mu.Lock()
	t.shards[j].mu.Lock()
	return func() {
		t.shards[j].mu.Unlock()
		t.shards[i].mu.Unlock()
	}
}
