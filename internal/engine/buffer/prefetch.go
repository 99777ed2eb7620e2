package buffer

import (
	"fmt"

	"github.com/vacuumops/vacuum-operator/internal/engine/storage"
)

// Prefetch reads blocks tag.Block .. tag.Block+n-1 of tag's fork ahead of
// their use, with one system call, into victims of s's ring (n is clamped
// to MaxRunBlocks and half the ring, as a run read is). It is the read-ahead
// of a sequential pass: a separate goroutine calls it with its own ringed
// strategy while the pass works on earlier blocks, so the pass's own reads
// find the pages in the pool (PostgreSQL 17's streaming reads do the same
// with its read stream). Blocks already in the pool are not read again.
// Every block read is left unpinned and flagged as read ahead, so its first
// access counts as the miss it replaces, on the reader's counters, and the
// hit, miss and cost figures are those of the pass without read-ahead; the
// bytes read are charged to s's counters. A block that fails verification
// or lies past the end is simply not read ahead: its own read reports it.
// It returns how many blocks the run it read covered (0 when none).
func (p *Pool) Prefetch(tag Tag, n int, s *Strategy) (int, error) {
	if !s.enter() {
		return 0, fmt.Errorf("prefetch block %d of rel %d fork %d: %w", tag.Block, tag.Rel, tag.Fork, ErrStrategyShared)
	}
	defer s.leave()
	s.prepare(p)
	if !s.ringed() {
		return 0, fmt.Errorf("prefetch block %d of rel %d fork %d: the strategy has no ring", tag.Block, tag.Rel, tag.Fork)
	}
	rr, ok := p.st.(runReader)
	if !ok {
		return 0, nil
	}
	n = max(1, min(n, MaxRunBlocks, len(s.ring)/2))
	// The run starts at the first block the pool does not hold.
	for n > 0 && p.inTable(tag) {
		tag.Block++
		n--
	}
	if n == 0 {
		return 0, nil
	}
	if nb, err := p.st.NBlocks(tag.Rel, tag.Fork); err != nil || tag.Block >= nb {
		return 0, err
	} else if end := storage.BlockNumber(n) + tag.Block; end > nb {
		n = int(nb - tag.Block)
	}
	p.writeRingAhead(s, n)
	v, err := p.victim(s)
	if err != nil {
		return 0, fmt.Errorf("prefetch block %d of rel %d fork %d: %w", tag.Block, tag.Rel, tag.Fork, err)
	}
	installed, err := p.readRun(v, tag, s, rr, n)
	if err != nil {
		return 0, nil // v was given up; the block's own read will report the error
	}
	if !installed {
		return 0, nil // another reader installed it meanwhile
	}
	v.mu.Lock()
	v.readAhead = true
	v.mu.Unlock()
	v.Release()
	return n, nil
}
