package vacuum_test

import (
	"context"
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine/usage"
	"github.com/vacuumops/vacuum-operator/internal/engine/vacuum"
)

// TestVacuumReportSplitsItsBufferUsageByPhase: the report says which pass paid the pages
// read and dirtied (experiment 8 compares them with PostgreSQL's), and the phases add up to
// the table's whole usage.
func TestVacuumReportSplitsItsBufferUsageByPhase(t *testing.T) {
	db, _ := newDB(t, testOpts())
	tb := createTable(t, db, "t", 1, 2000, 100)
	deletePercent(t, db, tb, 30, rand.New(rand.NewSource(8)))
	rep, err := db.Vacuum(context.Background(), "t", unthrottled())
	if err != nil {
		t.Fatal(err)
	}
	var sum usage.Reading
	byPhase := map[string]usage.Reading{}
	for _, pu := range rep.PhaseUsage {
		byPhase[pu.Phase] = pu.Usage
		sum = sum.Add(pu.Usage)
	}
	for _, p := range []string{"scanning heap", "vacuuming indexes", "vacuuming heap"} {
		u, ok := byPhase[p]
		if !ok || u.Hits+u.Misses == 0 {
			t.Errorf("phase %q: no page accesses in the report's split %+v", p, rep.PhaseUsage)
		}
	}
	if u := byPhase["vacuuming heap"]; u.Dirtied == 0 {
		t.Errorf("the second heap pass dirtied no page, but it freed %d dead items", rep.DeadItemsFreed)
	}
	if sum.Hits != rep.Usage.Hits || sum.Misses != rep.Usage.Misses || sum.Dirtied != rep.Usage.Dirtied || sum.Written != rep.Usage.Written {
		t.Errorf("phases add up to %d hits, %d misses, %d dirtied, %d written; the table's usage is %d, %d, %d, %d",
			sum.Hits, sum.Misses, sum.Dirtied, sum.Written, rep.Usage.Hits, rep.Usage.Misses, rep.Usage.Dirtied, rep.Usage.Written)
	}
	var b strings.Builder
	if err := rep.Format(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "buffer usage by phase: scanning heap: ") {
		t.Errorf("VERBOSE report has no per-phase line:\n%s", b.String())
	}
}

// TestVacuumReportSaysHowLongEachPhaseTook: where a vacuum's wall time goes (the first heap
// pass, the index pass, the second heap pass) is what decides which of them to make faster
// (docs/benchmarks/vacuum-speed.md); the phases' times add up to no more than the table's.
func TestVacuumReportSaysHowLongEachPhaseTook(t *testing.T) {
	db, _ := newDB(t, testOpts())
	tb := createTable(t, db, "t", 2, 4000, 100)
	deletePercent(t, db, tb, 20, rand.New(rand.NewSource(10)))
	rep, err := db.Vacuum(context.Background(), "t", unthrottled())
	if err != nil {
		t.Fatal(err)
	}
	var sum time.Duration
	byPhase := map[string]time.Duration{}
	for _, pu := range rep.PhaseUsage {
		byPhase[pu.Phase] = pu.Elapsed
		sum += pu.Elapsed
	}
	for _, p := range []string{"scanning heap", "vacuuming indexes", "vacuuming heap"} {
		if byPhase[p] <= 0 {
			t.Errorf("phase %q took %v by the report, want a positive time: %+v", p, byPhase[p], rep.PhaseUsage)
		}
	}
	if sum > rep.Elapsed {
		t.Errorf("the phases took %v in all, more than the table's %v", sum, rep.Elapsed)
	}
	var b strings.Builder
	if err := rep.Format(&b); err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("written, %.3f s", byPhase["scanning heap"].Seconds()); !strings.Contains(b.String(), want) {
		t.Errorf("VERBOSE report does not give the first pass's time (%q):\n%s", want, b.String())
	}
}

// TestVacuumFirstPassReadsTheVisibilityMapOncePerVMPage: the first pass checks every heap
// block's all-visible bit, and a cost-throttled vacuum pays each buffer access, so the check
// keeps its VM page pinned (as PostgreSQL's does) instead of charging a hit per heap block.
func TestVacuumFirstPassReadsTheVisibilityMapOncePerVMPage(t *testing.T) {
	db, _ := newDB(t, testOpts())
	createTable(t, db, "t", 1, 20000, 100)
	if _, err := db.Vacuum(context.Background(), "t", unthrottled()); err != nil {
		t.Fatal(err)
	}
	rep, err := db.Vacuum(context.Background(), "t", unthrottled()) // every page all-visible now
	if err != nil {
		t.Fatal(err)
	}
	if rep.PagesSkipped < 200 {
		t.Fatalf("second vacuum skipped %d of %d pages, want the table all-visible", rep.PagesSkipped, rep.PagesTotal)
	}
	scan := phaseUsage(rep, "scanning heap")
	// The skipped pages' tuple estimate reads up to SkippedSamplePages of them (CountPage
	// reads each twice: its line pointers, then its tuples); the VM of a few hundred blocks
	// is one page. A VM access per heap block would be 378 more.
	if got, most := scan.Hits+scan.Misses, int64(2*vacuum.SkippedSamplePages+1); got > most {
		t.Errorf("first pass over %d all-visible pages made %d buffer accesses, want at most %d (the sample and one VM page)",
			rep.PagesSkipped, got, most)
	}
}

// TestVacuumSecondPassSetsVisibilityBitsWithTheVMPagePinned: the second pass frees each
// page's dead slots and sets its VM bit in one record; the VM page stays pinned from page
// to page, so the pass pays the heap page and its free-space entry, not a VM access each.
func TestVacuumSecondPassSetsVisibilityBitsWithTheVMPagePinned(t *testing.T) {
	db, _ := newDB(t, testOpts())
	tb := createTable(t, db, "t", 1, 20000, 100)
	deletePercent(t, db, tb, 30, rand.New(rand.NewSource(9)))
	rep, err := db.Vacuum(context.Background(), "t", unthrottled())
	if err != nil {
		t.Fatal(err)
	}
	if rep.PagesVacuumed < 200 {
		t.Fatalf("the vacuum freed slots on %d pages, want most of the table's %d", rep.PagesVacuumed, rep.PagesTotal)
	}
	heap := phaseUsage(rep, "vacuuming heap")
	// Per page: the heap page and its FSM entry; the VM and FSM pages themselves, once.
	if got, most := heap.Hits+heap.Misses, 2*rep.PagesVacuumed+4; got > most {
		t.Errorf("second pass over %d pages made %d buffer accesses, want at most %d (a VM access per page would be %d more)",
			rep.PagesVacuumed, got, most, rep.PagesVacuumed)
	}
}

// phaseUsage is what the report says the vacuum used in phase (zero if it never entered it).
func phaseUsage(rep *vacuum.Report, phase string) usage.Reading {
	for _, pu := range rep.PhaseUsage {
		if pu.Phase == phase {
			return pu.Usage
		}
	}
	return usage.Reading{}
}
