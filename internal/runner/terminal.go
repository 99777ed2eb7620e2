package runner

import (
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"k8s.io/utils/ptr"

	"github.com/vacuumops/vacuum-operator/internal/runner/runnerwire"
)

// progressBar draws a run's progress on a terminal (stderr) until stop is called.
// The bar counts per-mille of the run; its description carries phase, table, pages/s and
// MB/s.
func progressBar(w io.Writer, progress func() runnerwire.Progress) (stop func()) {
	bar := progressbar.NewOptions(1000,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetWidth(30),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionShowElapsedTimeOnFinish(),
		progressbar.OptionSetPredictTime(false),
		progressbar.OptionClearOnFinish(),
	)
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			s := progress()
			bar.Describe(fmt.Sprintf("%-20s %-16s %7.0f pages/s %6.1f MB/s read %6.1f MB/s written",
				s.Phase, s.Table, s.PagesPerSecond, s.ReadBytesPerSecond/1e6, s.WriteBytesPerSecond/1e6))
			_ = bar.Set(int(math.Min(1000, s.Percent*10)))
			select {
			case <-done:
				_ = bar.Finish()
				return
			case <-t.C:
			}
		}
	}()
	return func() {
		close(done)
		<-finished
		_, _ = fmt.Fprintln(w) // the bar is decoration on stderr
	}
}

// writeVerbose prints a report the way VACUUM VERBOSE does, one block per table, with the
// achieved against the configured throttle.
func writeVerbose(w io.Writer, rep runnerwire.Report) error {
	p := &printer{w: w}
	for _, t := range rep.Tables {
		if t.Skipped && len(t.Notices) > 0 {
			p.printf("%s of %q: skipped by the server:\n", modeVerb(t.Mode), t.Table)
			for _, n := range t.Notices {
				p.printf("    %s\n", strings.ReplaceAll(n, "\n", "\n    "))
			}
			p.printf("\n")
			continue
		}
		if t.Skipped && t.ResumedFromBlock > 0 {
			p.printf("%s of %q: skipped (its vacuum finished in an earlier run; --resume has nothing left)\n\n", modeVerb(t.Mode), t.Table)
			continue
		}
		if t.Skipped {
			p.printf("%s of %q: skipped (dead tuples below --min-dead-percent)\n\n", modeVerb(t.Mode), t.Table)
			continue
		}
		switch {
		case !t.Complete && t.ElapsedSeconds == 0:
			p.printf("%s of %q: not started before the stop\n\n", modeVerb(t.Mode), t.Table)
			continue
		case !t.Complete:
			p.printf("%s of %q: stopped after %.2f s at block %d of %d (--resume continues there)\n",
				modeVerb(t.Mode), t.Table, t.ElapsedSeconds, t.BlockReached, t.PagesTotal)
		default:
			p.printf("%s of %q: finished in %.2f s\n", modeVerb(t.Mode), t.Table, t.ElapsedSeconds)
		}
		if t.ResumedFromBlock > 0 {
			p.printf("  resumed at block %d\n", t.ResumedFromBlock)
		}
		p.printf("  pages: %d removed, %d remain, %d scanned of %d (%.0f pages/s)\n",
			t.PagesRemoved, t.PagesRemaining, t.PagesScanned, t.PagesTotal, t.PagesPerSecond)
		p.printf("  tuples: %d removed, %d remain; index scans: %d\n", t.TuplesRemoved, t.TuplesRemaining, t.IndexPasses)
		for _, ix := range t.Indexes {
			p.printf("  index %q: %d pages, %d entries removed\n", ix.Name, ix.Pages, ix.EntriesRemoved)
		}
		secs := math.Max(t.ElapsedSeconds, 1e-9)
		p.printf("  avg read rate: %.3f MB/s, avg write rate: %.3f MB/s\n",
			float64(t.BytesRead)/secs/1e6, float64(t.BytesWritten)/secs/1e6)
		p.printf("  buffer usage: %d hits, %d misses, %d dirtied; ring: %d dirty evictions\n",
			t.BufferHits, t.BufferMisses, t.BuffersDirtied, t.RingDirtyEvictions)
		p.printf("  WAL usage: %d records, %d full page images, %d bytes, %d flushes\n",
			t.WALRecords, t.WALFullPageImages, t.WALBytes, t.WALFlushes)
		if len(t.Notices) > 0 {
			// An online table: the figures above come from the server's own notices.
			slept := "the server does not report time slept"
			if t.SleptSeconds != nil {
				slept = fmt.Sprintf("the server slept %.2f s", *t.SleptSeconds)
			}
			p.printf("  throttle: %s (%s)\n", rates(t.CostRate, t.ReadRate, t.WriteRate, t.WALRate), slept)
			p.printf("  server's VACUUM VERBOSE:\n")
			for _, n := range t.Notices {
				p.printf("    %s\n", strings.ReplaceAll(n, "\n", "\n    "))
			}
			p.printf("\n")
			continue
		}
		p.printf("  throttle: slept %.2f s; %s\n\n", ptr.Deref(t.SleptSeconds, 0),
			rates(t.CostRate, t.ReadRate, t.WriteRate, t.WALRate))
	}
	tt := rep.Totals
	p.printf("total: %d tables vacuumed, %d skipped, %d tuples removed, %d pages removed, %.2f s, %.0f pages/s; %s\n",
		tt.TablesVacuumed, tt.TablesSkipped, tt.TuplesRemoved, tt.PagesRemoved, tt.ElapsedSeconds, tt.PagesPerSecond,
		rates(tt.CostRate, tt.ReadRate, tt.WriteRate, tt.WALRate))
	return p.err
}

func modeVerb(m runnerwire.Mode) string {
	if m == runnerwire.ModeFull {
		return "VACUUM FULL"
	}
	return "vacuum"
}

// rates describes achieved against configured rates ("no limit" when 0).
func rates(cost, read, write, wal runnerwire.Rate) string {
	lim := func(r runnerwire.Rate, unit string, scale float64) string {
		if r.Configured == 0 {
			return fmt.Sprintf("%.1f %s (no limit)", r.Achieved/scale, unit)
		}
		return fmt.Sprintf("%.1f of %.1f %s (%.0f%%)", r.Achieved/scale, r.Configured/scale, unit, 100*r.Achieved/r.Configured)
	}
	return fmt.Sprintf("cost %s, read %s, write %s, WAL %s",
		lim(cost, "units/s", 1), lim(read, "MB/s", 1e6), lim(write, "MB/s", 1e6), lim(wal, "MB/s", 1e6))
}
