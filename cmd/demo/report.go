package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
)

// printReports prints each run's outcome, totals and per-table results.
func printReports(out io.Writer, runs []vacuumv1alpha1.VacuumRun) {
	for _, r := range runs {
		s := r.Status
		took := ""
		if s.StartTime != nil && s.CompletionTime != nil {
			took = " in " + s.CompletionTime.Sub(s.StartTime.Time).Round(100_000_000).String()
		}
		_, _ = fmt.Fprintf(out, "Run %s (policy %s, %s): %s%s, %d attempt(s)\n", r.Name, r.Spec.PolicyName, r.Spec.Mode, s.Phase, took, s.Attempts)
		if s.Message != "" {
			_, _ = fmt.Fprintf(out, "  %s\n", s.Message)
		}
		if t := s.Totals; t != nil {
			slept := "not reported by the server"
			if t.TimeSlept != nil {
				slept = t.TimeSlept.Duration.String()
			}
			_, _ = fmt.Fprintf(out, "  totals: %d tuples removed, %d pages scanned, %d pages removed, %d index passes, read %s, written %s, WAL %s, slept %s\n",
				t.TuplesRemoved, t.PagesScanned, t.PagesRemoved, t.IndexPasses, bytes(t.BytesRead), bytes(t.BytesWritten), bytes(t.WALBytes), slept)
		}
		if len(s.Tables) > 0 {
			var b strings.Builder
			w := tabwriter.NewWriter(&b, 0, 8, 3, ' ', 0)
			_, _ = fmt.Fprintln(w, "TABLE\tPHASE\tTUPLES REMOVED\tPAGES SCANNED\tPAGES REMOVED\tNOTE")
			for _, t := range s.Tables {
				note := ""
				if t.Skipped {
					note = "skipped (below minDeadTuplePercent)"
				}
				_, _ = fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%d\t%s\n", t.Name, dash(t.Phase), t.TuplesRemoved, t.PagesScanned, t.PagesRemoved, note)
			}
			_ = w.Flush()
			_, _ = fmt.Fprint(out, indent(b.String()))
		}
		if s.TablesOmitted > 0 {
			_, _ = fmt.Fprintf(out, "  (%d more tables did not fit in the termination message)\n", s.TablesOmitted)
		}
		_, _ = fmt.Fprintln(out)
	}
}

// failedRuns names the runs that did not succeed, or "".
func failedRuns(runs []vacuumv1alpha1.VacuumRun) string {
	var bad []string
	for _, r := range runs {
		if r.Status.Phase != vacuumv1alpha1.RunSucceeded {
			bad = append(bad, fmt.Sprintf("%s %s", r.Name, r.Status.Phase))
		}
	}
	return strings.Join(bad, ", ")
}

// bytes prints a byte count in MiB with one decimal.
func bytes(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
