package heap

import (
	"testing"

	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/wal"
)

// BenchmarkInsert measures heap inserts of 100-byte rows, 1000 per
// committed transaction, through the real WAL and buffer pool.
func BenchmarkInsert(b *testing.B) {
	e := newTestEnvWAL(b, 1024, benchWALOptions)
	row := make([]byte, 100)
	const perTxn = 1000
	b.ReportAllocs()
	tx := e.txns.Begin()
	for i := 0; i < b.N; i++ {
		if _, err := e.rel.Insert(tx, row, nil); err != nil {
			b.Fatal(err)
		}
		if (i+1)%perTxn == 0 {
			if err := e.txns.Commit(tx, nil); err != nil {
				b.Fatal(err)
			}
			tx = e.txns.Begin()
		}
	}
	if err := e.txns.Commit(tx, nil); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkScan measures a full sequential scan of 100k 100-byte rows.
func BenchmarkScan(b *testing.B) {
	e := newTestEnvWAL(b, 1024, benchWALOptions)
	row := make([]byte, 100)
	tx := e.txns.Begin()
	const rows = 100000
	for i := 0; i < rows; i++ {
		if _, err := e.rel.Insert(tx, row, nil); err != nil {
			b.Fatal(err)
		}
	}
	if err := e.txns.Commit(tx, nil); err != nil {
		b.Fatal(err)
	}
	snap := e.txns.Begin().Snapshot()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		n := 0
		if err := e.rel.Scan(b.Context(), snap, nil, func(_ page.TID, _ []byte) error { n++; return nil }); err != nil || n != rows {
			b.Fatalf("scan: %d rows, %v", n, err)
		}
	}
	b.ReportMetric(float64(rows*b.N)/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkBulkLoad measures VACUUM FULL-style loading a page at a time.
func BenchmarkBulkLoad(b *testing.B) {
	e := newTestEnvWAL(b, 1024, benchWALOptions)
	row := make([]byte, 100)
	l := e.rel.NewBulkLoader(nil)
	for i := 0; i < b.N; i++ {
		if _, err := l.Add(TupleHeader{Xmin: 3, Infomask: XminCommitted}, row); err != nil {
			b.Fatal(err)
		}
	}
	if err := l.Finish(); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkInsertRaw is BenchmarkBulkLoad through InsertRaw, for comparison.
func BenchmarkInsertRaw(b *testing.B) {
	e := newTestEnvWAL(b, 1024, benchWALOptions)
	row := make([]byte, 100)
	for i := 0; i < b.N; i++ {
		if _, err := e.rel.InsertRaw(TupleHeader{Xmin: 3, Infomask: XminCommitted}, row, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkPruneAndVacuum measures the heap half of lazy vacuum (prune,
// then free the dead slots and set the VM bit) on pages with 20% of their
// rows deleted.
func BenchmarkPruneAndVacuum(b *testing.B) {
	e := newTestEnvWAL(b, 4096, benchWALOptions)
	row := make([]byte, 100)
	tx := e.txns.Begin()
	var tids []page.TID
	for i := 0; i < 60000; i++ {
		tid, err := e.rel.Insert(tx, row, nil)
		if err != nil {
			b.Fatal(err)
		}
		tids = append(tids, tid)
	}
	if err := e.txns.Commit(tx, nil); err != nil {
		b.Fatal(err)
	}
	n, _ := e.rel.NBlocks()
	b.ResetTimer()
	pages := 0
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		d := e.txns.Begin()
		for j := i % 5; j < len(tids); j += 5 {
			if err := e.rel.Delete(d, tids[j], nil); err != nil {
				b.Fatal(err)
			}
		}
		if err := e.txns.Commit(d, nil); err != nil {
			b.Fatal(err)
		}
		// Refill so the next round has rows to delete.
		w := e.txns.Begin()
		for j := i % 5; j < len(tids); j += 5 {
			tid, err := e.rel.Insert(w, row, nil)
			if err != nil {
				b.Fatal(err)
			}
			tids[j] = tid
		}
		if err := e.txns.Commit(w, nil); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		h := e.txns.OldestXmin()
		for blk := uint32(0); blk < n; blk++ {
			pr, err := e.rel.PruneBlock(blk, h, nil)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := e.rel.VacuumBlock(blk, pr.DeadOffsets, h, nil); err != nil {
				b.Fatal(err)
			}
			pages++
		}
	}
	b.ReportMetric(float64(pages)/b.Elapsed().Seconds(), "pages/s")
}

// benchWALOptions uses production-sized WAL segments.
var benchWALOptions = wal.Options{SegmentSize: 64 << 20}

// BenchmarkReclaimBlock measures lazy vacuum's second heap pass a page
// (pages of 100-byte rows, every fifth deleted, the first pass already
// run): "classify-again" re-checks every tuple (ReclaimBlockPinned),
// "after-scan" trusts the first pass on the unchanged pages
// (ReclaimBlockAfterScan). The pages stay in the pool between the passes,
// so the re-check finds the first pass's hint bits set: the cheaper case
// for it.
func BenchmarkReclaimBlock(b *testing.B) {
	for _, afterScan := range []bool{false, true} {
		name := "classify-again"
		if afterScan {
			name = "after-scan"
		}
		b.Run(name, func(b *testing.B) {
			var pages int
			for range b.N {
				b.StopTimer()
				e := newTestEnvWAL(b, 4096, benchWALOptions)
				row := make([]byte, 100)
				tx := e.txns.Begin()
				var tids []page.TID
				for range 20000 {
					tid, err := e.rel.Insert(tx, row, nil)
					if err != nil {
						b.Fatal(err)
					}
					tids = append(tids, tid)
				}
				if err := e.txns.Commit(tx, nil); err != nil {
					b.Fatal(err)
				}
				d := e.txns.Begin()
				for j := 0; j < len(tids); j += 5 {
					if err := e.rel.Delete(d, tids[j], nil); err != nil {
						b.Fatal(err)
					}
				}
				if err := e.txns.Commit(d, nil); err != nil {
					b.Fatal(err)
				}
				h := e.txns.OldestXmin()
				n, _ := e.rel.NBlocks()
				scans := make([]ScanResult, n)
				for blk := range n {
					sr, err := e.rel.ScanForVacuum(blk, h, nil)
					if err != nil {
						b.Fatal(err)
					}
					scans[blk] = sr
				}
				b.StartTimer()
				for blk := range n {
					sr := scans[blk]
					var err error
					if afterScan {
						_, err = e.rel.ReclaimBlockAfterScan(blk, sr.DeadOffsets, sr.Reclaim, h, nil, nil)
					} else {
						_, err = e.rel.ReclaimBlockPinned(blk, sr.DeadOffsets, h, nil, nil)
					}
					if err != nil {
						b.Fatal(err)
					}
				}
				pages += int(n)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(pages), "ns/page")
		})
	}
}
