package buffer

import (
	"testing"

	"github.com/vacuumops/vacuum-operator/internal/engine/usage"
)

// A statement that reads a row and then changes it pins the row's page twice; PostgreSQL's
// PinBuffer counts only the first. Revisit reads must leave the usage count where the first
// access put it, and still be charged as hits.
func TestRevisitReadsDoNotRaiseTheUsageCount(t *testing.T) {
	p, _, _ := newTestPool(t, 16)
	var u usage.Counters
	s := p.NewStrategy(Normal, 0, &u)
	tag := blk(1, 3)
	readRelease(t, p, tag, s) // the first access: a miss, usage 1
	for range 4 {
		readRelease(t, p, tag, RevisitOf(s))
	}
	if n, _, ok := p.Resident(tag); !ok || n != 1 {
		t.Fatalf("after one read and four revisits: usage %d (resident %v), want 1", n, ok)
	}
	if r := u.Read(); r.Misses != 1 || r.Hits != 4 {
		t.Fatalf("counters %+v: want the miss and four hits charged to the statement", r)
	}
	readRelease(t, p, tag, s)
	if n, _, _ := p.Resident(tag); n != 2 {
		t.Fatalf("a new Normal access after the revisits: usage %d, want 2", n)
	}
	// A nil strategy's revisit works too and charges nothing.
	readRelease(t, p, tag, RevisitOf(nil))
	if n, _, _ := p.Resident(tag); n != 2 {
		t.Fatalf("after a revisit through RevisitOf(nil): usage %d, want 2", n)
	}
}

// A page the clock sweep brought to usage 0 counts once more when revisited: it is in use.
func TestRevisitLiftsAZeroUsageCountToOne(t *testing.T) {
	p, _, _ := newTestPool(t, 16)
	tag := blk(1, 4)
	readRelease(t, p, tag, nil)
	b := &p.bufs[mustID(t, p, tag)]
	b.mu.Lock()
	b.usage = 0
	b.mu.Unlock()
	readRelease(t, p, tag, RevisitOf(nil))
	if n, _, _ := p.Resident(tag); n != 1 {
		t.Fatalf("revisit of a page at usage 0: usage %d, want 1", n)
	}
}

// RevisitOf a ringed strategy is the strategy itself: its hits already stop at 1.
func TestRevisitOfARingIsTheRing(t *testing.T) {
	p, _, _ := newTestPool(t, 64)
	s := p.NewStrategy(BulkRead, 0, nil)
	if RevisitOf(s) != s {
		t.Fatal("RevisitOf(a BulkRead ring) is another strategy")
	}
	n := p.NewStrategy(Normal, 0, nil)
	if r := RevisitOf(n); r == n || r.Kind != Revisit || RevisitOf(n) != r {
		t.Fatalf("RevisitOf(Normal) = %+v: want one cached Revisit strategy", r)
	}
}

func mustID(t *testing.T, p *Pool, tag Tag) int32 {
	t.Helper()
	sh := p.table.shardFor(tag)
	sh.mu.RLock()
	defer sh.mu.RUnlock()
	id, ok := sh.m[tag]
	if !ok {
		t.Fatalf("%v not in the pool", tag)
	}
	return id
}
