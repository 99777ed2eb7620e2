package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
)

// watchRuns polls the VacuumRuns of the given policies every second and shows them like
// `kubectl get vacuumruns`: redrawn in place when live (a terminal), else one line per row
// whenever the row changes. It returns once every policy has a run and all runs have ended.
func watchRuns(ctx context.Context, c client.Client, ns string, policies []string, out io.Writer, live bool) ([]vacuumv1alpha1.VacuumRun, error) {
	runs, _, err := watchRunsPeak(ctx, c, ns, policies, out, live)
	return runs, err
}

// watchRunsPeak is watchRuns that also returns the foreground status with the highest p99
// against its baseline seen while a run was running (nil when none showed one).
func watchRunsPeak(ctx context.Context, c client.Client, ns string, policies []string, out io.Writer, live bool) ([]vacuumv1alpha1.VacuumRun, *vacuumv1alpha1.ForegroundStatus, error) {
	var peak *vacuumv1alpha1.ForegroundStatus
	drawn := 0
	last := map[string]string{}
	if !live {
		_, _ = fmt.Fprintln(out, renderTable(nil, time.Now())[0])
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		runs, err := listRuns(ctx, c, ns, policies)
		if err != nil {
			return nil, nil, err
		}
		for _, r := range runs {
			if r.Status.Phase == vacuumv1alpha1.RunRunning {
				peak = higherForeground(peak, r.Status.Foreground)
			}
		}
		lines := renderTable(runs, time.Now())
		if live {
			if drawn > 0 {
				_, _ = fmt.Fprintf(out, "\x1b[%dA\x1b[J", drawn)
			}
			_, _ = fmt.Fprintln(out, strings.Join(lines, "\n"))
			drawn = len(lines)
		} else {
			// One line per row whenever its phase, table or progress moves: rates and age
			// change every second and would only add noise to a log.
			for i, r := range runs {
				if key := string(r.Status.Phase) + "|" + r.Status.Table + "|" + r.Status.Progress; last[r.Name] != key {
					last[r.Name] = key
					_, _ = fmt.Fprintln(out, lines[i+1])
				}
			}
		}
		if allEnded(runs, policies) {
			return runs, peak, nil
		}
		select {
		case <-ctx.Done():
			return runs, peak, fmt.Errorf("waiting for the runs: %w", ctx.Err())
		case <-tick.C:
		}
	}
}

// higherForeground is whichever of a and b has the higher p99 against its baseline (a when
// b has none).
func higherForeground(a, b *vacuumv1alpha1.ForegroundStatus) *vacuumv1alpha1.ForegroundStatus {
	if b == nil || b.P99VsBaselinePerMille == nil {
		return a
	}
	if a == nil || a.P99VsBaselinePerMille == nil || *b.P99VsBaselinePerMille > *a.P99VsBaselinePerMille {
		return b.DeepCopy()
	}
	return a
}

// listRuns lists the runs of the policies, oldest first.
func listRuns(ctx context.Context, c client.Client, ns string, policies []string) ([]vacuumv1alpha1.VacuumRun, error) {
	var list vacuumv1alpha1.VacuumRunList
	if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return nil, fmt.Errorf("list vacuumruns: %w", err)
	}
	var runs []vacuumv1alpha1.VacuumRun
	for _, r := range list.Items {
		for _, p := range policies {
			if r.Spec.PolicyName == p || r.Labels[vacuumv1alpha1.LabelPolicy] == p {
				runs = append(runs, r)
				break
			}
		}
	}
	sort.SliceStable(runs, func(i, j int) bool {
		return runs[i].CreationTimestamp.Before(&runs[j].CreationTimestamp)
	})
	return runs, nil
}

// allEnded reports whether every policy has a run and every run has ended.
func allEnded(runs []vacuumv1alpha1.VacuumRun, policies []string) bool {
	seen := map[string]bool{}
	for _, r := range runs {
		if !r.IsFinished() {
			return false
		}
		seen[r.Spec.PolicyName] = true
	}
	for _, p := range policies {
		if !seen[p] {
			return false
		}
	}
	return true
}

// renderTable renders a header and one row per run, aligned, as kubectl get prints them.
func renderTable(runs []vacuumv1alpha1.VacuumRun, now time.Time) []string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 8, 3, ' ', 0)
	_, _ = fmt.Fprintln(w, "NAME\tPOLICY\tPHASE\tTABLE\tPROGRESS\tPAGES/S\tREAD/S\tWRITE/S\tFG-P99\tFG-VS-BASELINE\tAGE")
	for _, r := range runs {
		s := r.Status
		fgP99, fgVs := "", ""
		if f := s.Foreground; f != nil {
			fgP99, fgVs = f.P99, f.P99VsBaseline
		}
		_, _ = fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", r.Name, r.Spec.PolicyName, s.Phase,
			dash(s.Table), dash(s.Progress), s.PagesPerSecond, dash(s.ReadRate), dash(s.WriteRate),
			dash(fgP99), dash(fgVs), duration.HumanDuration(now.Sub(r.CreationTimestamp.Time)))
	}
	_ = w.Flush()
	return strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
}

func dash(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

func indent(s string) string {
	if s == "" {
		return ""
	}
	return "    " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ") + "\n"
}
