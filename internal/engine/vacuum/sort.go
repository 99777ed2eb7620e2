package vacuum

import (
	"bufio"
	"container/heap"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/vacuumops/vacuum-operator/internal/engine/btree"
	"github.com/vacuumops/vacuum-operator/internal/engine/page"
)

// entrySorter sorts the (key, new TID) entries of one index for VACUUM
// FULL's bottom-up build within a memory budget: entries are buffered up
// to the budget, each full buffer is sorted and written to a temporary
// file as a run, and the runs are merged at the end (an external merge
// sort, as PostgreSQL's tuplesort does beyond maintenance_work_mem).
//
// Run file layout: back-to-back records, little-endian: key length u16 |
// TID block u32 | TID offset u16 | key bytes. The files live in
// Options.TempDir (the runner's is <data>/pgsql_tmp, on the data volume)
// and are unlinked at once; they are never read after a crash.
type entrySorter struct {
	dir   string // temporary directory for runs ("" = os.TempDir())
	limit int64  // bytes of entries held in memory before a run is written
	used  int64
	buf   []btree.Entry
	runs  []*os.File
	total int64
}

const (
	entrySize = 40 // in memory (btree.Entry) besides its key's bytes
	runHeader = 8  // on disk, before the key
)

func newEntrySorter(dir string, memBytes int64) *entrySorter {
	return &entrySorter{dir: dir, limit: max(memBytes, 1024*entrySize)}
}

func (s *entrySorter) add(e btree.Entry) error {
	s.buf = append(s.buf, e)
	s.total++
	s.used += entrySize + int64(len(e.Key))
	if s.used >= s.limit {
		return s.spill()
	}
	return nil
}

// spill writes the sorted buffer as one run.
func (s *entrySorter) spill() error {
	slices.SortFunc(s.buf, btree.Compare)
	f, err := os.CreateTemp(s.dir, "vacuum-full-sort-*")
	if err != nil {
		return fmt.Errorf("create sort run: %w", err)
	}
	// Unlink at once: the run lives as long as the open file, and a
	// crash leaves nothing behind.
	_ = os.Remove(f.Name())
	s.runs = append(s.runs, f)
	w := bufio.NewWriterSize(f, 64<<10)
	var rec [runHeader]byte
	for _, e := range s.buf {
		binary.LittleEndian.PutUint16(rec[0:], uint16(len(e.Key)))
		binary.LittleEndian.PutUint32(rec[2:], e.TID.Block)
		binary.LittleEndian.PutUint16(rec[6:], uint16(e.TID.Off))
		if _, err := w.Write(rec[:]); err != nil {
			return fmt.Errorf("write sort run %s: %w", f.Name(), err)
		}
		if _, err := w.Write(e.Key); err != nil {
			return fmt.Errorf("write sort run %s: %w", f.Name(), err)
		}
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("write sort run %s: %w", f.Name(), err)
	}
	s.buf, s.used = s.buf[:0], 0
	return nil
}

// Runs reports how many runs were spilled to disk.
func (s *entrySorter) Runs() int { return len(s.runs) }

// iterator returns the entries in ascending order, in the shape
// btree.Build takes. The sorter must not be added to afterwards.
func (s *entrySorter) iterator() (func() (btree.Entry, bool, error), error) {
	if len(s.runs) == 0 {
		slices.SortFunc(s.buf, btree.Compare)
		i := 0
		return func() (btree.Entry, bool, error) {
			if i >= len(s.buf) {
				return btree.Entry{}, false, nil
			}
			i++
			return s.buf[i-1], true, nil
		}, nil
	}
	if len(s.buf) > 0 {
		if err := s.spill(); err != nil {
			return nil, err
		}
	}
	m := &merger{}
	for _, f := range s.runs {
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return nil, fmt.Errorf("rewind sort run: %w", err)
		}
		r := &runReader{r: bufio.NewReaderSize(f, 64<<10)}
		ok, err := r.next()
		if err != nil {
			return nil, err
		}
		if ok {
			m.h = append(m.h, r)
		}
	}
	heap.Init(&m.h)
	return m.next, nil
}

func (s *entrySorter) close() {
	for _, f := range s.runs {
		f.Close()
	}
	s.runs, s.buf = nil, nil
}

type runReader struct {
	r   *bufio.Reader
	cur btree.Entry
}

func (r *runReader) next() (bool, error) {
	var rec [runHeader]byte
	if _, err := io.ReadFull(r.r, rec[:]); err != nil {
		if errors.Is(err, io.EOF) {
			return false, nil
		}
		return false, fmt.Errorf("read sort run: %w", err)
	}
	key := make([]byte, binary.LittleEndian.Uint16(rec[0:]))
	if _, err := io.ReadFull(r.r, key); err != nil {
		return false, fmt.Errorf("read sort run: %w", err)
	}
	r.cur = btree.Entry{Key: key,
		TID: page.TID{Block: binary.LittleEndian.Uint32(rec[2:]), Off: page.OffsetNumber(binary.LittleEndian.Uint16(rec[6:]))}}
	return true, nil
}

type runHeap []*runReader

func (h runHeap) Len() int           { return len(h) }
func (h runHeap) Less(i, j int) bool { return btree.Compare(h[i].cur, h[j].cur) < 0 }
func (h runHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *runHeap) Push(x any)        { *h = append(*h, x.(*runReader)) } //nolint:errcheck,forcetypeassert // heap.Interface: only *runReader is ever pushed
func (h *runHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

type merger struct{ h runHeap }

func (m *merger) next() (btree.Entry, bool, error) {
	if len(m.h) == 0 {
		return btree.Entry{}, false, nil
	}
	top := m.h[0]
	e := top.cur
	ok, err := top.next()
	if err != nil {
		return btree.Entry{}, false, err
	}
	if ok {
		heap.Fix(&m.h, 0)
	} else {
		heap.Pop(&m.h)
	}
	return e, true, nil
}
