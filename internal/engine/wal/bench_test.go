package wal

import (
	"testing"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine/vfs"
)

func BenchmarkInsert(b *testing.B) {
	cases := []struct {
		name string
		rec  func() *Record
	}{
		{"commit-64B", func() *Record { return &Record{Rmgr: RmgrXact, XID: 7, Main: make([]byte, 64)} }},
		{"heap-block-200B", func() *Record {
			return &Record{Rmgr: RmgrHeap, XID: 7, Blocks: []BlockRef{{Rel: 1, Block: 3, Data: make([]byte, 200)}}}
		}},
		{"full-page-image", func() *Record {
			return &Record{Rmgr: RmgrHeap, Blocks: []BlockRef{{Rel: 1, Block: 3, Image: fullPage()}}}
		}},
	}
	for _, tc := range cases {
		for _, ckpt := range []bool{false, true} {
			name := tc.name
			if ckpt {
				name += "-checkpoints" // steady state: segments are recycled
			}
			b.Run(name, func(b *testing.B) { benchInsert(b, tc.rec(), ckpt) })
		}
	}
}

// benchInsert inserts rec repeatedly; with ckpt it checkpoints (flush, move
// the redo pointer, recycle old segments) every 32 MiB of WAL, as the
// engine does, so that new segments come from recycling.
func benchInsert(b *testing.B, rec *Record, ckpt bool) {
	l, err := Open(vfs.OS(), b.TempDir(), 0, Options{})
	if err != nil {
		b.Fatal(err)
	}
	size := len(Encode(rec))
	b.SetBytes(int64(size))
	start := time.Now()
	next := l.InsertLSN() + 32<<20
	for b.Loop() {
		lsn, err := l.Insert(rec, nil)
		if err != nil {
			b.Fatal(err)
		}
		if ckpt && lsn >= next {
			next = lsn + 32<<20
			if err := l.Flush(lsn, nil); err != nil {
				b.Fatal(err)
			}
			if err := l.RemoveBefore(l.SetRedoPtr()); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "records/s")
	if err := l.Close(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkFlush measures commit latency: insert one commit record and
// flush it, alone and with concurrent committers sharing fsyncs.
func BenchmarkFlush(b *testing.B) {
	commit := &Record{Rmgr: RmgrXact, XID: 1, Main: make([]byte, 16)}
	b.Run("serial", func(b *testing.B) {
		l, err := Open(vfs.OS(), b.TempDir(), 0, Options{})
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			lsn, err := l.Insert(commit, nil)
			if err == nil {
				err = l.Flush(lsn, nil)
			}
			if err != nil {
				b.Fatal(err)
			}
		}
		st := l.Stats()
		b.ReportMetric(float64(st.Flushes)/float64(st.Records), "fsyncs/commit")
		if err := l.Close(); err != nil {
			b.Fatal(err)
		}
	})
	b.Run("parallel", func(b *testing.B) {
		l, err := Open(vfs.OS(), b.TempDir(), 0, Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.SetParallelism(8) // 8 x GOMAXPROCS committers
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				lsn, err := l.Insert(commit, nil)
				if err == nil {
					err = l.Flush(lsn, nil)
				}
				if err != nil {
					b.Error(err)
					return
				}
			}
		})
		st := l.Stats()
		b.ReportMetric(float64(st.Flushes)/float64(st.Records), "fsyncs/commit")
		if err := l.Close(); err != nil {
			b.Fatal(err)
		}
	})
}
