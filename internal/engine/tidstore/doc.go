// Package tidstore is lazy vacuum's dead-TID store: the set of heap tuple
// identifiers (page.TID) that the heap scan found dead and that index vacuum
// must remove from every index before heap vacuum may mark their line
// pointers unused. It plays the part of PostgreSQL's tidstore.c (which
// replaced a sorted array of 6-byte ItemPointers capped at 1 GiB); the code
// and layout are our own.
//
// # Access pattern
//
// The heap scan adds TIDs block by block in increasing block order, all
// offsets of a block at once (AddBlock). Index vacuum then asks Contains for
// every index entry's TID, in index key order, i.e. random heap order,
// millions of times and from several index workers at once. Heap vacuum
// finally walks the blocks in order with their offsets (Iterate).
//
// # Layout
//
// Blocks are grouped in chunks of 64 consecutive block numbers
// (key = block>>6). The store holds three append-only arrays:
//
//	chunks  one 24-byte entry per chunk with a dead block, in key order:
//	          present uint64  bit b set: block key<<6|b has dead TIDs
//	          key     uint32  block >> 6
//	          base    uint32  index in words of the chunk's first bitmap
//	          layout  uint32  uniform width w in words, or auxFlag|i
//	words   uint64 bitmaps, one per present block, back to back in block
//	        order; bit (off-1) of the block's bitmap is offset off. A block's
//	        bitmap is ceil(maxOffset/64) words, so ~60 tuples per page cost
//	        one word.
//	aux     uint16 starts (relative to base) of the present blocks of a
//	        chunk whose blocks have different widths, followed by its end;
//	        only such "variable" chunks use aux.
//
// Contains finds the chunk at index key-firstKey when dead blocks are dense
// (the usual case; otherwise a binary search below that index), tests the
// present bit, ranks the block with one popcount, and reads one word:
// a handful of cache lines, against ~20 for a binary search over a sorted
// TID array. At ~60 tuples a page the store costs ~8.4 bytes per block with
// dead tuples: 0.73 bytes per TID at 20 % dead, 0.27 at 60 %, 2.7 at 5 %
// (the sorted array: 6).
//
// Each array is a segmented vector: fixed-size segments (64 KiB of words,
// 24 KiB of chunks, 8 KiB of aux) reached through a spine whose capacity
// doubles. Growth never copies the data (a store near its limit never
// holds two copies of itself) and there is no ceiling but 2^32 bitmap words
// (32 GiB).
//
// # Invariants
//
//   - Blocks are added in strictly increasing order; chunk keys are
//     strictly increasing; a chunk's bitmaps lie in words[base:next base).
//   - A uniform chunk's present blocks all have width layout; a variable
//     chunk has popcount(present)+1 aux entries, non-decreasing, the last
//     being its end. Only the last chunk is ever modified.
//   - Offsets are 1..MaxOffset (the most line pointers a page can hold).
//   - MemoryBytes is computed from the arrays' lengths and capacities and
//     equals what the Go allocator handed out for them: every segment size
//     is an exact allocation size and spine capacities are powers of two.
//   - Full(limit) is true as soon as the next AddBlock could push
//     MemoryBytes past limit, so a vacuum checking it before each block
//     never exceeds maintenanceWorkMem (a non-empty store's growth is at
//     most one segment per array).
//   - After building, every method but AddBlock and Reset only reads, so
//     any number of goroutines may call Contains and Iterate at once.
package tidstore
