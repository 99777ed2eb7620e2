package buffer

import (
	"encoding/binary"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/storage"
	"github.com/vacuumops/vacuum-operator/internal/engine/usage"
	"github.com/vacuumops/vacuum-operator/internal/engine/wal"
)

// The pool is tested against two tiny fakes of its Storage and WAL
// interfaces, so that each test can see exactly which reads, writes and
// flushes the pool performed and in which order.

type relFork struct {
	rel  storage.RelFileNode
	fork storage.ForkNum
}

// fakeStorage keeps written pages in memory. A block never written reads as
// a page stamped with its own identity (stampOff), so tests can check that a
// buffer holds the page it claims to. Forks without an explicit size are
// unbounded. Every write checks WAL-before-data against log.
type fakeStorage struct {
	log *fakeWAL

	mu         sync.Mutex
	pages      map[Tag][]byte
	sizes      map[relFork]storage.BlockNumber
	corrupt    map[Tag]bool
	reads      map[Tag]int
	writes     map[Tag]int
	violations []string
	readDelay  time.Duration
}

const stampOff = 64 // where fake pages carry their identity

func newFakeStorage(log *fakeWAL) *fakeStorage {
	return &fakeStorage{
		log: log, pages: map[Tag][]byte{}, sizes: map[relFork]storage.BlockNumber{},
		corrupt: map[Tag]bool{}, reads: map[Tag]int{}, writes: map[Tag]int{},
	}
}

func stamp(p []byte, tag Tag) {
	binary.LittleEndian.PutUint32(p[stampOff:], uint32(tag.Rel))
	p[stampOff+4] = byte(tag.Fork)
	binary.LittleEndian.PutUint32(p[stampOff+8:], uint32(tag.Block))
}

func stampOf(p []byte) Tag {
	return Tag{
		Rel:   storage.RelFileNode(binary.LittleEndian.Uint32(p[stampOff:])),
		Fork:  storage.ForkNum(p[stampOff+4]),
		Block: storage.BlockNumber(binary.LittleEndian.Uint32(p[stampOff+8:])),
	}
}

func (f *fakeStorage) Read(rel storage.RelFileNode, fork storage.ForkNum, blk storage.BlockNumber, buf []byte, u *usage.Counters) error {
	tag := Tag{rel, fork, blk}
	f.mu.Lock()
	f.reads[tag]++
	delay := f.readDelay
	size, bounded := f.sizes[relFork{rel, fork}]
	bad := f.corrupt[tag]
	stored := f.pages[tag]
	f.mu.Unlock()
	time.Sleep(delay)
	switch {
	case bounded && blk >= size:
		return fmt.Errorf("read block %d of rel %d: past end of fork (%d blocks)", blk, rel, size)
	case bad:
		return &storage.CorruptPageError{File: fmt.Sprintf("base/%d", rel), Block: blk, Reason: "checksum mismatch"}
	case stored != nil:
		copy(buf, stored)
	default:
		clear(buf)
		stamp(buf, tag)
	}
	u.Add(usage.ReadBytes, page.Size)
	return nil
}

func (f *fakeStorage) Write(rel storage.RelFileNode, fork storage.ForkNum, blk storage.BlockNumber, buf []byte, u *usage.Counters) error {
	tag := Tag{rel, fork, blk}
	lsn := wal.LSN(page.Page(buf).LSN())
	flushed := f.log.FlushedLSN()
	f.mu.Lock()
	defer f.mu.Unlock()
	if lsn > flushed {
		f.violations = append(f.violations, fmt.Sprintf("block %v written with page LSN %d > flushed WAL %d", tag, lsn, flushed))
	}
	f.pages[tag] = append([]byte(nil), buf...)
	f.writes[tag]++
	f.log.event(fmt.Sprintf("write %d", blk))
	u.Add(usage.WriteBytes, page.Size)
	return nil
}

func (f *fakeStorage) Extend(rel storage.RelFileNode, fork storage.ForkNum, u *usage.Counters) (storage.BlockNumber, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	rf := relFork{rel, fork}
	n := f.sizes[rf]
	f.sizes[rf] = n + 1
	f.pages[Tag{rel, fork, n}] = make([]byte, page.Size)
	return n, nil
}

func (f *fakeStorage) NBlocks(rel storage.RelFileNode, fork storage.ForkNum) (storage.BlockNumber, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if n, ok := f.sizes[relFork{rel, fork}]; ok {
		return n, nil
	}
	return 1 << 31, nil
}

func (f *fakeStorage) setSize(rel storage.RelFileNode, fork storage.ForkNum, n storage.BlockNumber) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sizes[relFork{rel, fork}] = n
}

func (f *fakeStorage) readCount(tag Tag) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reads[tag]
}

func (f *fakeStorage) writeCount(tag Tag) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.writes[tag]
}

func (f *fakeStorage) totalWrites() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.writes {
		n += c
	}
	return n
}

func (f *fakeStorage) checkWALRule(t *testing.T) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, v := range f.violations {
		t.Error("WAL-before-data violated:", v)
	}
}

// fakeWAL hands out LSNs 100 apart. Flush makes everything inserted so far
// durable (as a real group flush that writes the whole WAL buffer does), so
// one forced flush covers every record inserted before it.
type fakeWAL struct {
	mu       sync.Mutex
	insert   wal.LSN
	flushed  wal.LSN
	redo     wal.LSN
	flushes  int
	records  []*wal.Record
	events   []string
	flushErr error
}

func newFakeWAL() *fakeWAL { return &fakeWAL{insert: 1000, flushed: 1000, redo: 1000} }

func (w *fakeWAL) event(e string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.events = append(w.events, e)
}

func (w *fakeWAL) Flush(upTo wal.LSN, u *usage.Counters) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.flushErr != nil {
		return w.flushErr
	}
	if upTo <= w.flushed {
		return nil
	}
	w.flushes++
	w.flushed = w.insert
	w.events = append(w.events, fmt.Sprintf("flush %d", upTo))
	u.Add(usage.WALFlushes, 1)
	return nil
}

func (w *fakeWAL) FlushedLSN() wal.LSN {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.flushed
}

func (w *fakeWAL) Insert(rec *wal.Record, u *usage.Counters) (wal.LSN, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.insert += 100
	cp := *rec
	cp.Blocks = append([]wal.BlockRef(nil), rec.Blocks...)
	for i := range cp.Blocks {
		if b := &cp.Blocks[i]; b.Page != nil && !b.WillInit && wal.LSN(b.Page.LSN()) <= w.redo {
			b.Image = append([]byte(nil), b.Page...)
			u.Add(usage.WALFPIs, 1)
		}
	}
	w.records = append(w.records, &cp)
	u.Add(usage.WALRecords, 1)
	return w.insert, nil
}

func (w *fakeWAL) RedoPtr() wal.LSN {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.redo
}

// checkpoint moves the redo pointer to the insert position.
func (w *fakeWAL) checkpoint() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.redo = w.insert
}

func (w *fakeWAL) recordCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.records)
}

func (w *fakeWAL) flushCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.flushes
}

// newTestPool returns a pool of frames frames over fresh fakes.
func newTestPool(t testing.TB, frames int) (*Pool, *fakeStorage, *fakeWAL) {
	t.Helper()
	log := newFakeWAL()
	st := newFakeStorage(log)
	p, err := New(st, log, Options{Frames: frames})
	if err != nil {
		t.Fatal(err)
	}
	return p, st, log
}

// modify changes a pinned page the way every WAL-logged change does:
// exclusive lock, change, MarkDirty, insert a record, set the page LSN.
func modify(t testing.TB, b *Buffer, log *fakeWAL, s *Strategy) wal.LSN {
	t.Helper()
	b.Lock()
	defer b.Unlock()
	b.Page()[stampOff+16]++
	b.MarkDirty(s)
	tag := b.Tag()
	lsn, err := log.Insert(&wal.Record{Rmgr: wal.RmgrHeap, Blocks: []wal.BlockRef{{
		Rel: tag.Rel, Fork: tag.Fork, Block: tag.Block, Page: b.Page(), Data: []byte{1},
	}}}, s.counters())
	if err != nil {
		t.Fatal(err)
	}
	b.Page().SetLSN(uint64(lsn))
	return lsn
}

// readRelease reads tag and releases it, failing the test on error.
func readRelease(t testing.TB, p *Pool, tag Tag, s *Strategy) {
	t.Helper()
	b, err := p.Read(tag, s)
	if err != nil {
		t.Fatalf("read %v: %v", tag, err)
	}
	b.Release()
}

func blk(rel storage.RelFileNode, n int) Tag {
	return Tag{Rel: rel, Fork: storage.MainFork, Block: storage.BlockNumber(n)}
}
