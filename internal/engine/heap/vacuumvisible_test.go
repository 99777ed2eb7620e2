package heap

import (
	"errors"
	"io"
	"testing"

	"github.com/vacuumops/vacuum-operator/internal/engine/storage"
	"github.com/vacuumops/vacuum-operator/internal/engine/txn"
	"github.com/vacuumops/vacuum-operator/internal/engine/wal"
)

// recordsFrom returns every WAL record of e that starts at or after from.
func (e *testEnv) recordsFrom(from wal.LSN) []*wal.Record {
	e.t.Helper()
	if err := e.log.Flush(e.log.InsertLSN(), nil); err != nil {
		e.t.Fatal(err)
	}
	r, err := wal.NewReader(e.fs, e.dir, 0, e.walOpts)
	if err != nil {
		e.t.Fatal(err)
	}
	defer r.Close()
	var out []*wal.Record
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			e.t.Fatalf("read WAL: %v", err)
		}
		if rec.StartLSN >= from {
			out = append(out, rec)
		}
	}
}

func TestReclaimLogsOneRecordThatReplaysToTheSamePageAndVMBit(t *testing.T) {
	cases := []struct {
		name string
		// inFlight leaves a tuple of a running transaction on the page, so the
		// page cannot become all-visible.
		inFlight bool
		// images starts a checkpoint first, so the heap page is imaged.
		images      bool
		wantInfo    uint8
		wantBlocks  int
		wantVisible bool
	}{
		{name: "all visible afterwards", wantInfo: InfoVacuumVisible, wantBlocks: 2, wantVisible: true},
		{name: "all visible afterwards, pages imaged", images: true, wantInfo: InfoVacuumVisible, wantBlocks: 2, wantVisible: true},
		{name: "a running inserter's tuple stays", inFlight: true, wantInfo: InfoVacuum, wantBlocks: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newTestEnv(t, 64)
			tids := e.insertCommitted("a", "b", "c", "d", "e", "f")
			e.deleteCommitted(tids[1], tids[4])
			if tc.inFlight {
				e.insert(e.begin(), "running")
			}
			h := e.txns.OldestXmin()
			sr, err := e.rel.ScanForVacuum(0, h, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(sr.DeadOffsets) != 2 {
				t.Fatalf("first pass found dead offsets %v, want 2", sr.DeadOffsets)
			}
			if tc.images {
				e.log.SetRedoPtr()
			}
			from := e.log.InsertLSN()
			res, err := e.rel.ReclaimBlock(0, sr.DeadOffsets, h, nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.Freed != 2 || res.AllVisible != tc.wantVisible {
				t.Fatalf("reclaim freed %d, all-visible %v; want 2, %v", res.Freed, res.AllVisible, tc.wantVisible)
			}
			recs := e.recordsFrom(from)
			if len(recs) != 1 {
				t.Fatalf("reclaim logged %d records, want 1", len(recs))
			}
			rec := recs[0]
			if rec.Rmgr != wal.RmgrHeap || rec.Info != tc.wantInfo || len(rec.Blocks) != tc.wantBlocks {
				t.Fatalf("record rmgr %d info %d with %d blocks, want heap info %d with %d", rec.Rmgr, rec.Info, len(rec.Blocks), tc.wantInfo, tc.wantBlocks)
			}
			// The heap page; a new VM page is always imaged at its first change.
			if imaged := rec.Blocks[0].Image != nil; imaged != tc.images {
				t.Fatalf("heap block imaged %v, want %v", imaged, tc.images)
			}
			if tc.wantBlocks == 2 && (rec.Blocks[1].Fork != storage.VMFork || rec.Blocks[1].Block != 0) {
				t.Fatalf("second block is fork %d block %d, want VM block 0", rec.Blocks[1].Fork, rec.Blocks[1].Block)
			}
			set, err := e.rel.VM().IsSet(0, nil)
			if err != nil || set != tc.wantVisible {
				t.Fatalf("primary's VM bit %v (%v), want %v", set, err, tc.wantVisible)
			}

			want := pageSummary(t, e, 0)
			f := e.replayAll()
			g := e.replayInto(f) // a second replay over the replayed pages changes nothing
			for name, r := range map[string]*testEnv{"replay": f, "second replay": g} {
				if got := pageSummary(t, r, 0); got != want {
					t.Fatalf("%s: page differs:\nprimary:\n%s\nreplayed:\n%s", name, want, got)
				}
				set, err := r.rel.VM().IsSet(0, nil)
				if err != nil || set != tc.wantVisible {
					t.Fatalf("%s: VM bit %v (%v), want %v", name, set, err, tc.wantVisible)
				}
			}
		})
	}
}

func TestRemovedXmaxOfAVacuumVisibleRecordNamesTheDeleterForTheHeapPageOnly(t *testing.T) {
	e := newTestEnv(t, 64)
	tids := e.insertCommitted("a", "b", "c")
	d := e.begin()
	if err := e.rel.Delete(d, tids[1], nil); err != nil {
		t.Fatal(err)
	}
	e.commit(d)
	h := e.txns.OldestXmin()
	sr, err := e.rel.ScanForVacuum(0, h, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The page as a standby holds it before replaying the record.
	b, err := e.rel.read(0, nil)
	if err != nil {
		t.Fatal(err)
	}
	before := append([]byte(nil), b.Page()...)
	b.Release()
	from := e.log.InsertLSN()
	if _, err := e.rel.ReclaimBlock(0, sr.DeadOffsets, h, nil); err != nil {
		t.Fatal(err)
	}
	recs := e.recordsFrom(from)
	if len(recs) != 1 || recs[0].Info != InfoVacuumVisible {
		t.Fatalf("want one InfoVacuumVisible record, got %d records", len(recs))
	}
	if x, ok := RemovedXmax(recs[0], 0, before); !ok || x != d.XID() {
		t.Fatalf("heap block: RemovedXmax = %d, %v; want the deleter %d", x, ok, d.XID())
	}
	if x, ok := RemovedXmax(recs[0], 1, before); ok || x != txn.InvalidXID {
		t.Fatalf("VM block: RemovedXmax = %d, %v; want none", x, ok)
	}
}
