package vacuum

import (
	"fmt"
	"io"
	"strings"

	"github.com/vacuumops/vacuum-operator/internal/engine/txn"
)

// Format writes rep as PostgreSQL's VACUUM VERBOSE would, plus the
// throttle lines: one fact per line, figures first.
func (rep *Report) Format(w io.Writer) error {
	var b strings.Builder
	verb := "vacuuming"
	if rep.Mode == ModeFull {
		verb = "vacuuming (full)"
	}
	fmt.Fprintf(&b, "finished %s %q: index scans: %d\n", verb, rep.Table, rep.IndexPasses)
	if rep.Skipped {
		fmt.Fprintf(&b, "skipped: %s\n", rep.SkipReason)
	}
	if rep.Resumed {
		fmt.Fprintf(&b, "resumed at block %d: %d pages below it are not all-visible (changed since, or not yet removable then) and are left for the next vacuum without resume\n",
			rep.ResumedFromBlock, rep.PagesLeftBehind)
	}
	if rep.ResumeUntrusted != "" {
		fmt.Fprintf(&b, "started at block 0: the saved position is not used: %s\n", rep.ResumeUntrusted)
	}
	pct := 0.0
	if rep.PagesTotal > 0 {
		pct = 100 * float64(rep.PagesScanned) / float64(rep.PagesTotal)
	}
	fmt.Fprintf(&b, "pages: %d removed, %d remain, %d scanned (%.2f%% of total), %d skipped all-visible\n",
		rep.PagesRemoved, rep.PagesRemaining, rep.PagesScanned, pct, rep.PagesSkipped)
	est := ""
	if rep.TuplesRemainingEstimated {
		est = " (estimated)"
	}
	fmt.Fprintf(&b, "tuples: %d removed, %d remain%s, %d are dead but not yet removable\n",
		rep.TuplesRemoved, rep.TuplesRemaining, est, rep.RecentlyDead)
	if rep.RemovableCutoff != 0 {
		fmt.Fprintf(&b, "removable cutoff: %d, which was %d XIDs old when operation ended\n", rep.RemovableCutoff, rep.CutoffAge)
	}
	if rep.Mode == ModeLazy {
		fmt.Fprintf(&b, "dead item identifiers: %d freed on %d pages\n", rep.DeadItemsFreed, rep.PagesVacuumed)
	}
	for _, ix := range rep.Indexes {
		fmt.Fprintf(&b, "index %q: pages: %d in total, %d scanned; entries: %d removed, %d remain\n",
			ix.Name, ix.Pages, ix.PagesScanned, ix.EntriesRemoved, ix.EntriesRemaining)
	}
	writeUsage(&b, rep.Usage.ReadBytes, rep.Usage.WriteBytes, rep.Elapsed.Seconds())
	u := rep.Usage
	fmt.Fprintf(&b, "buffer usage: %d hits, %d misses, %d dirtied, %d written\n", u.Hits, u.Misses, u.Dirtied, u.Written)
	if len(rep.PhaseUsage) > 0 {
		parts := make([]string, len(rep.PhaseUsage))
		for i, pu := range rep.PhaseUsage {
			parts[i] = fmt.Sprintf("%s: %d hits, %d misses, %d dirtied, %d written, %.3f s", pu.Phase, pu.Usage.Hits, pu.Usage.Misses, pu.Usage.Dirtied, pu.Usage.Written, pu.Elapsed.Seconds())
		}
		fmt.Fprintf(&b, "buffer usage by phase: %s\n", strings.Join(parts, "; "))
	}
	fmt.Fprintf(&b, "WAL usage: %d records, %d full page images, %d bytes, %d flushes\n", u.WALRecords, u.WALFPIs, u.WALBytes, u.WALFlushes)
	fmt.Fprintf(&b, "ring: %d dirty evictions, %d of them flushed WAL first\n", u.RingDirtyEvictions, u.RingWALFlushes)
	fmt.Fprintf(&b, "system usage: elapsed %.3f s, slept %.3f s, %.1f pages/s\n", rep.Elapsed.Seconds(), rep.Slept.Seconds(), rep.PagesPerSecond)
	writeRates(&b, rep.Rates)
	_, err := io.WriteString(w, b.String())
	return err
}

// Format writes every table's report, then the run's totals.
func (rr *BatchReport) Format(w io.Writer) error {
	for _, rep := range rr.Tables {
		if err := rep.Format(w); err != nil {
			return err
		}
	}
	var b strings.Builder
	t := rr.Totals
	fmt.Fprintf(&b, "run: %d tables vacuumed, %d skipped; pages: %d removed, %d remain, %d scanned; tuples: %d removed, %d remain; index scans: %d\n",
		t.TablesVacuumed, t.TablesSkipped, t.PagesRemoved, t.PagesRemaining, t.PagesScanned, t.TuplesRemoved, t.TuplesRemaining, t.IndexPasses)
	writeUsage(&b, t.Usage.ReadBytes, t.Usage.WriteBytes, t.Elapsed.Seconds())
	fmt.Fprintf(&b, "run usage: elapsed %.3f s, slept %.3f s (summed over workers), %.1f pages/s\n", t.Elapsed.Seconds(), t.Slept.Seconds(), t.PagesPerSecond)
	writeRates(&b, t.Rates)
	_, err := io.WriteString(w, b.String())
	return err
}

func writeUsage(b *strings.Builder, read, written int64, secs float64) {
	var r, wr float64
	if secs > 0 {
		r, wr = float64(read)/secs/(1<<20), float64(written)/secs/(1<<20)
	}
	fmt.Fprintf(b, "avg read rate: %.3f MB/s, avg write rate: %.3f MB/s\n", r, wr)
}

func writeRates(b *strings.Builder, rs Rates) {
	parts := []string{}
	for _, x := range []struct {
		name, unit string
		r          Rate
	}{{"cost", "units/s", rs.Cost}, {"read", "B/s", rs.Read}, {"write", "B/s", rs.Write}, {"WAL", "B/s", rs.WAL}} {
		conf := "unlimited"
		if x.r.Configured > 0 {
			conf = fmt.Sprintf("limit %.0f", x.r.Configured)
		}
		parts = append(parts, fmt.Sprintf("%s %.0f %s (%s)", x.name, x.r.Achieved, x.unit, conf))
	}
	fmt.Fprintf(b, "throttle: %s\n", strings.Join(parts, ", "))
}

// setCutoff records the horizon the vacuum removed tuples below and its age at the end
// (next is the first xid not yet assigned then); a vacuum that stopped before taking its
// horizon records nothing.
func (rep *Report) setCutoff(horizon, next txn.XID) {
	if horizon == txn.InvalidXID {
		return
	}
	rep.RemovableCutoff = uint64(horizon)
	if next > horizon {
		rep.CutoffAge = int64(next - horizon)
	}
}
