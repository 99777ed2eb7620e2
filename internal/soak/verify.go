package soak

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/vacuumops/vacuum-operator/internal/engine"
	"github.com/vacuumops/vacuum-operator/internal/engine/page"
)

// verify reopens the data directory after a crash and compares it with the
// ledger; every divergence is a problem. It resolves the in-flight
// transaction in the ledger.
func (d *driver) verify() error {
	pend, err := d.ledger.Read()
	if err != nil {
		return err
	}
	if len(pend) > 1 {
		d.problem("%d transactions in flight in the ledger, at most one may be", len(pend))
		return nil
	}
	db, err := engine.Open(d.cfg.Data, EngineOptions())
	if err != nil {
		d.problem("reopen: %v", err)
		return nil
	}
	committed, problems := d.compare(db, pend)
	if cerr := db.Close(); cerr != nil {
		problems = append(problems, fmt.Sprintf("close: %v", cerr))
	}
	for _, p := range problems {
		d.problem("%s", p)
	}
	if len(problems) > 0 || len(pend) == 0 {
		return nil
	}
	return d.ledger.Resolve(pend[0], committed)
}

// compare checks db against the ledger state (plus, maybe, the in-flight
// transaction) through the heap, both indexes and Check. It returns
// whether the in-flight transaction was found committed, and the problems.
func (d *driver) compare(db *engine.DB, pend []Pending) (bool, []string) {
	fig := d.fig
	fig.Verifications++
	ri := db.RecoveryInfo()
	if ri.Replayed > 0 {
		fig.Replays++
		fig.Replayed += int64(ri.Replayed)
	}
	if ri.TornTail != nil {
		fig.TornTails++
	}
	got, err := scanState(db)
	if err != nil {
		return false, []string{fmt.Sprintf("scan: %v", err)}
	}
	fig.RowsChecked += int64(len(got))
	want, committed := d.ledger.State, false
	if diff := stateDiff(got, want); diff != "" {
		if len(pend) == 0 {
			return false, []string{"visible rows differ from the ledger: " + diff}
		}
		with := want.Clone()
		with.Apply(pend[0].Ops)
		if diff2 := stateDiff(got, with); diff2 != "" {
			return false, []string{fmt.Sprintf("visible rows match neither the ledger (%s) nor the ledger plus in-flight transaction %s (%s)",
				diff, pend[0].Tx, diff2)}
		}
		want, committed = with, true
	}
	problems := checkIndexes(db, want, fig)
	rep, err := db.Check(context.Background())
	if err != nil {
		return committed, append(problems, fmt.Sprintf("check: %v", err))
	}
	fig.PagesChecked += rep.Pages
	for _, p := range rep.Problems {
		problems = append(problems, "check: "+p.String())
	}
	return committed, problems
}

// scanState reads every visible row of the table.
func scanState(db *engine.DB) (State, error) {
	tx, err := db.Begin()
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback() }()
	out := State{}
	err = tx.Scan(Table, func(tid page.TID, r []any) error {
		id, row, err := decodeRow(r)
		if err != nil {
			return fmt.Errorf("row at %v: %w", tid, err)
		}
		if _, dup := out[id]; dup {
			return fmt.Errorf("id %d visible twice (again at %v)", id, tid)
		}
		out[id] = row
		return nil
	})
	return out, err
}

func decodeRow(r []any) (int64, Row, error) {
	if len(r) != 4 {
		return 0, Row{}, fmt.Errorf("%d columns, want 4", len(r))
	}
	id, ok1 := r[0].(int64)
	grp, ok2 := r[1].(int64)
	val, ok3 := r[2].([]byte)
	n, ok4 := r[3].(int64)
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return 0, Row{}, fmt.Errorf("column types %T %T %T %T", r[0], r[1], r[2], r[3])
	}
	return id, Row{Grp: grp, N: n, Val: string(val)}, nil
}

// checkIndexes looks every row up through the id index and scans both
// indexes whole: each row exactly once, with the expected content.
func checkIndexes(db *engine.DB, want State, fig *Figures) []string {
	tx, err := db.Begin()
	if err != nil {
		return []string{fmt.Sprintf("begin: %v", err)}
	}
	defer func() { _ = tx.Rollback() }()
	var problems []string
	add := func(format string, args ...any) {
		if len(problems) < 10 {
			problems = append(problems, fmt.Sprintf(format, args...))
		}
	}
	for id, w := range want {
		found, err := tx.IndexLookup(IDIndex, id)
		fig.IndexLookups++
		if err != nil {
			add("index lookup %d: %v", id, err)
			continue
		}
		if len(found) != 1 {
			add("index lookup %d: %d rows, want 1", id, len(found))
			continue
		}
		if gid, g, err := decodeRow(found[0].Row); err != nil || gid != id || g != w {
			add("index lookup %d: row %v (%v), want %v", id, g, err, w)
		}
	}
	for _, ix := range []string{IDIndex, GrpIndex} {
		seen := map[int64]bool{}
		err := tx.IndexRange(ix, nil, nil, func(f engine.Found) error {
			id, g, err := decodeRow(f.Row)
			if err != nil {
				return err
			}
			if seen[id] {
				add("index %s: id %d returned twice", ix, id)
			}
			seen[id] = true
			if w, ok := want[id]; !ok || w != g {
				add("index %s: id %d = %v, want %v (present %v)", ix, id, g, w, ok)
			}
			return nil
		})
		if err != nil {
			add("index %s range scan: %v", ix, err)
		} else if len(seen) != len(want) {
			add("index %s range scan: %d rows, want %d", ix, len(seen), len(want))
		}
	}
	return problems
}

// stateDiff describes how got differs from want ("" when equal).
func stateDiff(got, want State) string {
	var diffs []string
	for id, w := range want {
		g, ok := got[id]
		switch {
		case !ok:
			diffs = append(diffs, fmt.Sprintf("id %d lost", id))
		case g != w:
			diffs = append(diffs, fmt.Sprintf("id %d = %v, want %v", id, g, w))
		}
	}
	for id, g := range got {
		if _, ok := want[id]; !ok {
			diffs = append(diffs, fmt.Sprintf("id %d = %v resurrected or never committed", id, g))
		}
	}
	sort.Strings(diffs)
	if len(diffs) > 5 {
		diffs = append(diffs[:5], fmt.Sprintf("... %d differences in all", len(diffs)))
	}
	return strings.Join(diffs, "; ")
}
