package buffer

import (
	"errors"
	"fmt"

	"github.com/vacuumops/vacuum-operator/internal/engine/storage"
	"github.com/vacuumops/vacuum-operator/internal/engine/usage"
)

// Read returns the page tag pinned (not locked), reading it if needed.
// A nil s means Normal with no counters. A checksum failure returns the
// storage error unchanged (it names file and block).
func (p *Pool) Read(tag Tag, s *Strategy) (*Buffer, error) { return p.read(tag, s, false) }

// ReadOrZero is Read, but a block that fails verification, or lies past the
// end of the fork, is returned as a zeroed page instead of an error (for
// hint structures such as the free space map).
func (p *Pool) ReadOrZero(tag Tag, s *Strategy) (*Buffer, error) { return p.read(tag, s, true) }

func (p *Pool) read(tag Tag, s *Strategy, orZero bool) (*Buffer, error) {
	if !s.enter() {
		return nil, fmt.Errorf("read block %d of rel %d fork %d: %w", tag.Block, tag.Rel, tag.Fork, ErrStrategyShared)
	}
	defer s.leave()
	s.prepare(p)
	for {
		if b, found, ahead := p.lookup(tag, s); found {
			if b == nil {
				continue // the read we waited for failed: try it ourselves
			}
			s.noteAccess(tag)
			if ahead {
				// First access to a page a run read ahead: the miss it
				// stands for.
				p.stats.misses.Add(1)
				s.counters().Add(usage.Misses, 1)
				return b, nil
			}
			p.stats.hits.Add(1)
			s.counters().Add(usage.Hits, 1)
			return b, nil
		}
		n := 1
		rr, canRun := p.st.(runReader)
		if canRun && !orZero {
			n = s.runLength(tag)
		}
		if n > 1 {
			p.writeRingAhead(s, n)
		}
		v, err := p.victim(s)
		if err != nil {
			return nil, fmt.Errorf("read block %d of rel %d fork %d: %w", tag.Block, tag.Rel, tag.Fork, err)
		}
		if n > 1 {
			// The run installs v itself, after choosing its other victims.
			installed, err := p.readRun(v, tag, s, rr, n)
			if err != nil {
				return nil, err
			}
			if !installed {
				continue
			}
		} else {
			if !p.install(v, tag) {
				v.Release()
				continue
			}
			if err := p.fill(v, tag, s, orZero); err != nil {
				return nil, err
			}
		}
		s.noteAccess(tag)
		p.stats.misses.Add(1)
		s.counters().Add(usage.Misses, 1)
		return v, nil
	}
}

// lookup pins tag's buffer if the page table has it. found && b == nil
// means the buffer's read failed while we waited: look again. ahead
// reports the first access to a page a run read ahead (the flag is
// cleared).
func (p *Pool) lookup(tag Tag, s *Strategy) (b *Buffer, found, ahead bool) {
	sh := p.table.shardFor(tag)
	sh.mu.RLock()
	id, ok := sh.m[tag]
	if !ok {
		sh.mu.RUnlock()
		return nil, false, false
	}
	b = &p.bufs[id]
	b.mu.Lock()
	sh.mu.RUnlock()
	b.pinLocked(s)
	if b.valid {
		ahead = b.readAhead
		b.readAhead = false
		b.mu.Unlock()
		return b, true, ahead
	}
	var ch chan struct{}
	if b.ioInProgress {
		ch = b.ioWaitLocked()
	}
	b.mu.Unlock()
	if ch != nil {
		<-ch // another goroutine is reading the page: share its read
	}
	b.mu.Lock()
	ok = b.valid && b.tagValid && b.tag == tag
	if ok {
		ahead = b.readAhead
		b.readAhead = false
	}
	b.mu.Unlock()
	if ok {
		return b, true, ahead
	}
	b.Release()
	return nil, true, false
}

// fill reads tag into the freshly installed buffer b and ends its IO. On
// failure the buffer is given up (and unpinned) and the error returned.
func (p *Pool) fill(b *Buffer, tag Tag, s *Strategy, orZero bool) error {
	err := p.st.Read(tag.Rel, tag.Fork, tag.Block, b.frame, s.counters())
	if err != nil && orZero && p.zeroable(tag, err) {
		clear(b.frame)
		err = nil
	}
	if err != nil {
		p.abortIO(b, tag)
		return err
	}
	b.finishIO()
	return nil
}

// zeroable reports whether ReadOrZero may substitute a zeroed page for a
// failed read: the page is corrupt, or the block lies past the fork's end.
func (p *Pool) zeroable(tag Tag, err error) bool {
	var corrupt *storage.CorruptPageError
	if errors.As(err, &corrupt) {
		return true
	}
	n, nerr := p.st.NBlocks(tag.Rel, tag.Fork)
	return nerr == nil && tag.Block >= n
}

// Extend appends a zeroed block to the fork and returns it pinned and
// exclusively locked, with its block number in Tag().
func (p *Pool) Extend(rel storage.RelFileNode, fork storage.ForkNum, s *Strategy) (*Buffer, error) {
	if !s.enter() {
		return nil, fmt.Errorf("extend rel %d fork %d: %w", rel, fork, ErrStrategyShared)
	}
	defer s.leave()
	s.prepare(p)
	blk, err := p.st.Extend(rel, fork, s.counters())
	if err != nil {
		return nil, fmt.Errorf("extend rel %d fork %d: %w", rel, fork, err)
	}
	tag := Tag{Rel: rel, Fork: fork, Block: blk}
	for {
		if b, found, _ := p.lookup(tag, s); found {
			if b == nil {
				continue
			}
			// A stale buffer for a block past the old end (e.g. one
			// ReadOrZero produced): the new block is zeros on disk.
			b.Lock()
			clear(b.frame)
			return b, nil
		}
		v, err := p.victim(s)
		if err != nil {
			return nil, fmt.Errorf("extend rel %d fork %d to block %d: %w", rel, fork, blk, err)
		}
		if !p.install(v, tag) {
			v.Release()
			continue
		}
		// Lock before the buffer becomes valid, so the caller is the
		// first to hold its content lock.
		v.content.Lock()
		clear(v.frame)
		v.finishIO()
		return v, nil
	}
}
