package buffer

// clockVictim runs the clock sweep and returns an unpinned buffer whose
// usage count reached 0, pinned by the caller (refcount 1). Like
// PostgreSQL's StrategyGetBuffer it gives up with ErrNoUnpinnedBuffers when
// it passes every frame without finding an unpinned one (the countdown is
// reset whenever a usage count is decremented, since that is progress).
func (p *Pool) clockVictim() (*Buffer, error) {
	n := uint64(len(p.bufs))
	tries := n
	for {
		b := &p.bufs[(p.hand.Add(1)-1)%n]
		b.mu.Lock()
		if b.refcount == 0 {
			if b.usage == 0 {
				b.refcount = 1
				b.mu.Unlock()
				return b, nil
			}
			b.usage--
			tries = n
		} else {
			tries--
			if tries == 0 {
				b.mu.Unlock()
				return nil, ErrNoUnpinnedBuffers
			}
		}
		b.mu.Unlock()
	}
}

// victim returns a buffer to reuse, pinned by the caller and clean: from
// the strategy's ring when its next slot may be reused, else from the clock
// sweep (remembered in the ring). A dirty victim is written first, WAL
// flushed up to its page LSN before the write. A victim whose content lock
// is busy is skipped, so an evicting goroutine never waits on a lock another
// goroutine holds (no deadlock with callers that hold other content locks).
func (p *Pool) victim(s *Strategy) (*Buffer, error) {
	for {
		var b *Buffer
		fromRing := false
		if s.ringed() {
			b = s.ringNext(p)
			fromRing = b != nil
		}
		if b == nil {
			var err error
			if b, err = p.clockVictim(); err != nil {
				return nil, err
			}
			if s.ringed() {
				s.ringSet(b)
			}
		}
		b.mu.Lock()
		needWrite := b.dirty && b.valid && b.tagValid
		b.mu.Unlock()
		if !needWrite {
			return b, nil
		}
		if !b.content.TryRLock() {
			b.Release()
			continue
		}
		err := p.write(b, s, fromRing)
		b.content.RUnlock()
		if err != nil {
			b.Release()
			return nil, err
		}
		return b, nil
	}
}

// install re-tags the victim b (pinned once, by the caller) to tag and
// starts its read IO. It fails, leaving b as it was, when another goroutine
// pinned or dirtied b since it was chosen, or mapped tag meanwhile: the
// caller releases b and looks tag up again.
func (p *Pool) install(b *Buffer, tag Tag) bool {
	b.mu.Lock()
	old, hadOld := b.tag, b.tagValid
	b.mu.Unlock()

	var unlock func()
	if hadOld {
		unlock = p.table.lockPair(old, tag)
	} else {
		sh := p.table.shardFor(tag)
		sh.mu.Lock()
		unlock = sh.mu.Unlock
	}
	defer unlock()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.refcount != 1 || b.tagValid != hadOld || (hadOld && b.tag != old) || (b.tagValid && b.dirty) {
		return false
	}
	sh := p.table.shardFor(tag)
	if _, ok := sh.m[tag]; ok {
		return false
	}
	if hadOld {
		delete(p.table.shardFor(old).m, old)
		p.stats.evictions.Add(1)
	}
	sh.m[tag] = b.id
	b.tag = tag
	b.tagValid = true
	b.valid = false
	b.dirty = false
	b.justDirtied = false
	b.readAhead = false
	b.usage = 1
	b.ioInProgress = true
	return true
}

// finishIO ends b's IO as successful (the frame now holds the page).
func (b *Buffer) finishIO() {
	b.mu.Lock()
	b.valid = true
	ch := b.endIOLocked()
	b.mu.Unlock()
	if ch != nil {
		close(ch)
	}
}

// ioWaitLocked returns a channel closed when b's running IO ends (header
// lock held, IO in progress). It is made on demand, so an IO nobody waits
// for allocates nothing.
func (b *Buffer) ioWaitLocked() chan struct{} {
	if b.ioDone == nil {
		b.ioDone = make(chan struct{})
	}
	return b.ioDone
}

// endIOLocked ends b's IO (header lock held) and returns the channel to
// close once the lock is released, nil when nobody waits.
func (b *Buffer) endIOLocked() chan struct{} {
	b.ioInProgress = false
	ch := b.ioDone
	b.ioDone = nil
	return ch
}

// endWrite ends a write of b begun by setting ioInProgress (and clearing justDirtied):
// the buffer is clean only when the write succeeded and nobody dirtied it meanwhile; then
// waiters are woken.
func (b *Buffer) endWrite(err error) {
	b.mu.Lock()
	if err == nil && !b.justDirtied {
		b.dirty = false
	}
	ch := b.endIOLocked()
	b.mu.Unlock()
	if ch != nil {
		close(ch)
	}
}

// abortIO ends b's failed read: the tag leaves the page table, waiters see
// an invalid buffer and retry, and the caller's pin is dropped.
func (p *Pool) abortIO(b *Buffer, tag Tag) {
	sh := p.table.shardFor(tag)
	sh.mu.Lock()
	b.mu.Lock()
	if b.tagValid && b.tag == tag {
		if id, ok := sh.m[tag]; ok && id == b.id {
			delete(sh.m, tag)
		}
		b.tagValid = false
	}
	b.valid = false
	b.usage = 0
	ch := b.endIOLocked()
	if b.refcount > 0 {
		b.refcount--
	}
	b.mu.Unlock()
	sh.mu.Unlock()
	if ch != nil {
		close(ch)
	}
}
