package buffer

import (
	"errors"

	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/storage"
	"github.com/vacuumops/vacuum-operator/internal/engine/usage"
	"github.com/vacuumops/vacuum-operator/internal/engine/vfs"
	"github.com/vacuumops/vacuum-operator/internal/engine/wal"
)

// MaxRunBlocks is the most blocks a sequential read through a BulkRead or
// Vacuum ring fetches with one system call (128 KiB).
const MaxRunBlocks = 16

// runReader is implemented by storage managers that can read consecutive
// blocks with one system call (*storage.Manager.ReadRun).
type runReader interface {
	ReadRun(rel storage.RelFileNode, fork storage.ForkNum, start storage.BlockNumber, buf []byte, u *usage.Counters) (int, error)
}

// runLength is how many blocks a miss on tag through s may read at once:
// 1 unless s is a BulkRead or Vacuum ring whose previous access was to the
// block just before tag (a sequential scan), and at most half the ring, so
// that the run never needs a ring slot it still holds pinned.
func (s *Strategy) runLength(tag Tag) int {
	if !s.ringed() || (s.Kind != BulkRead && s.Kind != Vacuum) {
		return 1
	}
	if !s.seqValid || s.seqRel != tag.Rel || s.seqFork != tag.Fork || s.seqNext != tag.Block {
		return 1
	}
	return max(1, min(MaxRunBlocks, len(s.ring)/2))
}

// noteAccess remembers tag as s's latest access (for runLength).
func (s *Strategy) noteAccess(tag Tag) {
	if s == nil {
		return
	}
	s.seqValid = true
	s.seqRel, s.seqFork, s.seqNext = tag.Rel, tag.Fork, tag.Block+1
}

// inTable reports whether the page table maps tag (a hint: it may change
// as soon as the shard lock is released).
func (p *Pool) inTable(tag Tag) bool {
	sh := p.table.shardFor(tag)
	sh.mu.RLock()
	_, ok := sh.m[tag]
	sh.mu.RUnlock()
	return ok
}

// readRun reads tag into first (a victim of s, pinned by the caller, not
// yet installed) together with up to n-1 following blocks with one system
// call, into their frames or s's staging buffer, and leaves first pinned.
// false (and no error) means tag was mapped by another goroutine meanwhile
// (first is released): the caller looks it up again.
//
// Every victim of the run is chosen, and a dirty one written, before any
// block is installed: only then does each block enter the page table with
// its IO in progress. So a foreground reader of one of the run's blocks
// waits for the run's one read at most, never behind the writes (and WAL
// flushes) of the later victims' old pages, as it did when each block was
// installed as its victim was found.
//
// A following block already mapped (or mapped while the victims were
// chosen) is read but its bytes are dropped (the pool's copy may be newer).
// After the read each buffer is filled and its IO finished, or, for a block
// the read did not reach or that failed verification, its IO aborted
// (waiters retry and report the error on their own read). The following
// buffers are left unpinned, flagged as read ahead so that their first
// access counts as the miss it replaces. On failure for tag itself its
// buffer is given up and the error returned, as fill does.
func (p *Pool) readRun(first *Buffer, tag Tag, s *Strategy, rr runReader, n int) (bool, error) {
	run := s.runBufs[:0]
	run = append(run, first)
	for i := 1; i < n; i++ {
		t := tag
		t.Block += storage.BlockNumber(i)
		if t.Block == storage.InvalidBlock {
			break
		}
		if p.inTable(t) {
			run = append(run, nil)
			continue
		}
		v, err := p.victim(s)
		if err != nil {
			break // no room for more: read what we have
		}
		run = append(run, v)
	}
	if !p.install(first, tag) {
		for _, v := range run {
			if v != nil {
				v.Release()
			}
		}
		clear(run)
		s.runBufs = run[:0]
		return false, nil
	}
	for i := 1; i < len(run); i++ {
		t := tag
		t.Block += storage.BlockNumber(i)
		if run[i] != nil && !p.install(run[i], t) {
			run[i].Release()
			run[i] = nil
		}
	}
	for len(run) > 1 && run[len(run)-1] == nil {
		run = run[:len(run)-1]
	}
	s.runBufs = run[:0]
	if err := p.fillRun(run, tag, s, rr); err != nil {
		return false, err
	}
	return true, nil
}

// fillRun reads the run's blocks (run[i] holds tag.Block+i, installed with
// IO in progress and pinned, or is nil for a block mapped already) with one
// system call and ends every buffer's IO (see readRun); run[0] stays
// pinned.
func (p *Pool) fillRun(run []*Buffer, tag Tag, s *Strategy, rr runReader) error {
	first := run[0]
	// When the run's buffers are adjacent frames of the slab (as ring
	// slots taken in clock order usually are), read straight into them;
	// otherwise into the staging buffer, then copy. Either way every frame
	// in the range belongs to a buffer of this run, under IO: a frame the
	// read fills but whose block fails verification is never made valid.
	direct := true
	for i, b := range run {
		if b == nil || b.id != first.id+int32(i) {
			direct = false
			break
		}
	}
	var dst []byte
	if direct {
		dst = p.slab[int(first.id)*page.Size : (int(first.id)+len(run))*page.Size]
	} else {
		if s.stage == nil {
			s.stage = vfs.AlignedBuffer(MaxRunBlocks * page.Size)
		}
		dst = s.stage[:len(run)*page.Size]
	}
	got, err := rr.ReadRun(tag.Rel, tag.Fork, tag.Block, dst, s.counters())
	for i, b := range run {
		if b == nil {
			continue
		}
		t := tag
		t.Block += storage.BlockNumber(i)
		if i >= got {
			p.abortIO(b, t) // drops the pin
			continue
		}
		if !direct {
			copy(b.frame, s.stage[i*page.Size:(i+1)*page.Size])
		}
		if i == 0 {
			b.finishIO()
			continue
		}
		b.mu.Lock()
		b.readAhead = true
		b.mu.Unlock()
		b.finishIO()
		b.Release()
	}
	clear(run) // drop the references kept in s.runBufs's backing array
	if got == 0 {
		return err
	}
	return nil
}

// runWriter is implemented by storage managers that can write consecutive
// blocks with one system call (*storage.Manager.WriteRun).
type runWriter interface {
	WriteRun(rel storage.RelFileNode, fork storage.ForkNum, start storage.BlockNumber, buf []byte, u *usage.Counters) error
}

// writeRingAhead cleans the next n slots of s's ring before a run reuses
// them: when they hold dirty pages of consecutive blocks (as they do after
// the vacuum's second heap pass or a scan that set hints dirtied them in
// order), the longest such run from the next slot on is written with one
// system call instead of one per eviction. Each buffer is pinned, share
// locked (TryRLock: never waits) and put under IO exactly as write does,
// the WAL is flushed once up to the highest page LSN, and the buffers are
// marked clean unless dirtied again meanwhile. Anything that does not fit
// (a pinned, hot, busy or non-consecutive slot) ends the run; the slots
// left dirty are written one by one at eviction as before, and so are all
// of them if the run write fails (the error is reported there).
func (p *Pool) writeRingAhead(s *Strategy, n int) {
	rw, ok := p.st.(runWriter)
	if !ok || !s.ringed() {
		return
	}
	n = min(n, len(s.ring), MaxRunBlocks)
	run := s.runBufs[:0]
	var first Tag
	for i := 1; i <= n; i++ {
		id := s.ring[(s.cur+i)%len(s.ring)]
		if id < 0 || int(id) >= len(p.bufs) {
			break
		}
		b := &p.bufs[id]
		b.mu.Lock()
		okb := b.refcount == 0 && b.usage <= 1 && b.dirty && b.valid && b.tagValid && !b.ioInProgress
		if okb && len(run) > 0 {
			t := b.tag
			okb = t.Rel == first.Rel && t.Fork == first.Fork && t.Block == first.Block+storage.BlockNumber(len(run))
		}
		if okb {
			b.refcount++
		}
		tag := b.tag
		b.mu.Unlock()
		if !okb {
			break
		}
		if !b.content.TryRLock() {
			b.Release()
			break
		}
		if len(run) == 0 {
			first = tag
		}
		run = append(run, b)
	}
	if len(run) < 2 {
		for _, b := range run {
			b.content.RUnlock()
			b.Release()
		}
		clear(run)
		s.runBufs = run[:0]
		return
	}
	if s.wstage == nil {
		s.wstage = vfs.AlignedBuffer(MaxRunBlocks * page.Size)
	}
	// Start the IO of each buffer and copy its page under the header lock
	// (as write does: MarkDirtyHint may set the LSN under a share lock).
	k := 0
	var maxLSN uint64
	for _, b := range run {
		b.mu.Lock()
		if b.ioInProgress || !b.dirty || !b.valid || !b.tagValid || b.tag.Block != first.Block+storage.BlockNumber(k) {
			b.mu.Unlock()
			break
		}
		b.ioInProgress = true
		b.justDirtied = false
		copy(s.wstage[k*page.Size:(k+1)*page.Size], b.frame)
		maxLSN = max(maxLSN, b.frame.LSN())
		b.mu.Unlock()
		k++
	}
	var err error
	if k < 2 {
		err = errShortRun
	}
	u := s.counters()
	if err == nil && wal.LSN(maxLSN) > p.log.FlushedLSN() {
		p.stats.ringWALFlushes.Add(1)
		u.Add(usage.RingWALFlushes, 1)
		err = p.log.Flush(wal.LSN(maxLSN), u)
	}
	if err == nil {
		err = rw.WriteRun(first.Rel, first.Fork, first.Block, s.wstage[:k*page.Size], u)
	}
	for i, b := range run {
		if i < k {
			b.endWrite(err)
		}
		b.content.RUnlock()
		b.Release()
	}
	if err == nil {
		p.stats.written.Add(int64(k))
		u.Add(usage.Written, int64(k))
		p.stats.ringDirtyEvictions.Add(int64(k))
		u.Add(usage.RingDirtyEvictions, int64(k))
	}
	clear(run)
	s.runBufs = run[:0]
}

// errShortRun: too few buffers were left to make writing a run worth it.
var errShortRun = errors.New("run too short")
