package kubectlvacuum

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
)

// StatusReport is what `status` prints: the policies asked for and their runs (or every run of
// the namespace without a policy name). Its JSON and YAML are `status -o json|yaml`.
type StatusReport struct {
	Policies []PolicyRow `json:"policies"`
	Runs     []RunRow    `json:"runs"`
}

// PolicyRow is one VacuumPolicy as status shows it.
type PolicyRow struct {
	Namespace   string       `json:"namespace"`
	Name        string       `json:"name"`
	Schedule    string       `json:"schedule,omitempty"`
	TimeZone    string       `json:"timeZone,omitempty"`
	Window      string       `json:"window,omitempty"`
	Suspended   bool         `json:"suspended"`
	Active      []string     `json:"active,omitempty"`
	LastResult  string       `json:"lastResult,omitempty"`
	LastSuccess *metav1.Time `json:"lastSuccess,omitempty"`
	NextRun     *metav1.Time `json:"nextRun,omitempty"`
	Ready       string       `json:"ready,omitempty"`
}

// RunRow is one VacuumRun with its live progress.
type RunRow struct {
	Namespace      string       `json:"namespace"`
	Name           string       `json:"name"`
	Policy         string       `json:"policy,omitempty"`
	Phase          string       `json:"phase"`
	Reason         string       `json:"reason,omitempty"`
	Table          string       `json:"table,omitempty"`
	VacuumPhase    string       `json:"vacuumPhase,omitempty"`
	Percent        int32        `json:"percent"`
	PagesPerSecond int64        `json:"pagesPerSecond"`
	ReadRate       string       `json:"readRate,omitempty"`
	WriteRate      string       `json:"writeRate,omitempty"`
	WALRate        string       `json:"walRate,omitempty"`
	Throttle       string       `json:"throttle"`
	Paused         bool         `json:"paused"`
	ForegroundP99  string       `json:"foregroundP99,omitempty"`
	WindowStopAt   *metav1.Time `json:"windowStopAt,omitempty"`
	Created        metav1.Time  `json:"created"`
	Message        string       `json:"message,omitempty"`
}

func (e *env) statusCommand() *cobra.Command {
	var output string
	var all bool
	cmd := &cobra.Command{
		Use:   "status [POLICY]",
		Short: "Show policies and their runs with live progress",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "" && output != "json" && output != "yaml" {
				return fmt.Errorf("--output %q: want json or yaml (or nothing for a table)", output)
			}
			if all && len(args) == 1 {
				return fmt.Errorf("a policy name and --all-namespaces exclude each other")
			}
			ns := e.ns
			if all {
				ns = ""
			}
			rep, err := e.report(cmd, ns, args)
			if err != nil {
				return err
			}
			return printReport(e.streams.Out, rep, output, all)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: json or yaml (default: a table)")
	cmd.Flags().BoolVarP(&all, "all-namespaces", "A", false, "policies and runs of every namespace")
	return cmd
}

// report reads the policies (all of ns, or the one named) and their runs.
func (e *env) report(cmd *cobra.Command, ns string, args []string) (*StatusReport, error) {
	ctx := cmd.Context()
	var policies []vacuumv1alpha1.VacuumPolicy
	var runOpts []client.ListOption
	if ns != "" {
		runOpts = append(runOpts, client.InNamespace(ns))
	}
	if len(args) == 1 {
		var p vacuumv1alpha1.VacuumPolicy
		if err := e.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: args[0]}, &p); err != nil {
			return nil, fmt.Errorf("get vacuumpolicy %s/%s: %w", ns, args[0], err)
		}
		policies = []vacuumv1alpha1.VacuumPolicy{p}
		runOpts = append(runOpts, client.MatchingLabels{vacuumv1alpha1.LabelPolicy: p.Name})
	} else {
		var list vacuumv1alpha1.VacuumPolicyList
		if err := e.c.List(ctx, &list, runOpts...); err != nil {
			return nil, fmt.Errorf("list vacuumpolicies: %w", err)
		}
		policies = list.Items
	}
	var runs vacuumv1alpha1.VacuumRunList
	if err := e.c.List(ctx, &runs, runOpts...); err != nil {
		return nil, fmt.Errorf("list vacuumruns: %w", err)
	}
	rep := &StatusReport{Policies: []PolicyRow{}, Runs: []RunRow{}}
	for i := range policies {
		rep.Policies = append(rep.Policies, policyRow(&policies[i]))
	}
	sort.Slice(runs.Items, func(i, j int) bool {
		a, b := &runs.Items[i], &runs.Items[j]
		if a.IsFinished() != b.IsFinished() {
			return !a.IsFinished() // active runs first
		}
		return b.CreationTimestamp.Before(&a.CreationTimestamp) // then the newest
	})
	for i := range runs.Items {
		rep.Runs = append(rep.Runs, runRow(&runs.Items[i]))
	}
	return rep, nil
}

func policyRow(p *vacuumv1alpha1.VacuumPolicy) PolicyRow {
	row := PolicyRow{
		Namespace: p.Namespace, Name: p.Name, Schedule: p.Spec.Schedule, TimeZone: p.Spec.TimeZone,
		Suspended: p.Spec.Suspend, Active: p.Status.Active,
		LastSuccess: p.Status.LastSuccessfulTime, NextRun: p.Status.NextScheduleTime,
	}
	if w := p.Spec.Window; w != nil {
		row.Window = fmt.Sprintf("%s for %s", w.Schedule, time.Duration(w.DurationSeconds)*time.Second)
	}
	if c := meta.FindStatusCondition(p.Status.Conditions, vacuumv1alpha1.ConditionLastRunSucceeded); c != nil {
		row.LastResult = c.Reason
	}
	if c := meta.FindStatusCondition(p.Status.Conditions, vacuumv1alpha1.ConditionReady); c != nil {
		row.Ready = string(c.Status)
	}
	return row
}

func runRow(r *vacuumv1alpha1.VacuumRun) RunRow {
	st := &r.Status
	row := RunRow{
		Namespace: r.Namespace, Name: r.Name, Policy: r.Spec.PolicyName, Phase: string(st.Phase),
		Table: st.Table, VacuumPhase: st.VacuumPhase, Percent: st.Percent,
		PagesPerSecond: st.PagesPerSecond, ReadRate: st.ReadRate, WriteRate: st.WriteRate, WALRate: st.WALRate,
		Throttle: throttleSummary(r), Paused: r.Spec.Paused || st.IsPaused(),
		Created: r.CreationTimestamp, Message: st.Message,
	}
	if row.Phase == "" {
		row.Phase = string(vacuumv1alpha1.RunPending)
	}
	if c := reasonOf(r); c != nil {
		row.Reason = c.Reason
	}
	if f := st.Foreground; f != nil {
		row.ForegroundP99 = f.P99
	}
	if w := r.Spec.Window; w != nil {
		row.WindowStopAt = w.StopAt.DeepCopy()
	}
	return row
}

// reasonOf is the condition that says best where the run is: its outcome once ended, else
// Progressing.
func reasonOf(r *vacuumv1alpha1.VacuumRun) *metav1.Condition {
	if c := r.Status.Outcome(); c != nil {
		return c
	}
	return meta.FindStatusCondition(r.Status.Conditions, vacuumv1alpha1.ConditionProgressing)
}

// formatThrottle is a throttle in a few characters: "2ms/200", with its byte caps.
func formatThrottle(t *vacuumv1alpha1.Throttle) string {
	delay, limit := "2ms", int32(200) // the CRD's defaults, for a throttle read before defaulting
	if t.CostDelay != nil {
		delay = t.CostDelay.Duration.String()
	}
	if t.CostLimit != nil {
		limit = *t.CostLimit
	}
	s := fmt.Sprintf("%s/%d", delay, limit)
	for _, q := range []struct {
		name string
		v    *resource.Quantity
	}{{"read", t.MaxReadBytesPerSecond}, {"write", t.MaxWriteBytesPerSecond}, {"wal", t.MaxWALBytesPerSecond}} {
		if q.v != nil && !q.v.IsZero() {
			s += fmt.Sprintf(" %s<=%s/s", q.name, q.v.String())
		}
	}
	return s
}

// throttleSummary is the run's throttle, and the runner's when it has not taken the spec's
// yet.
func throttleSummary(r *vacuumv1alpha1.VacuumRun) string {
	s := formatThrottle(&r.Spec.Throttle)
	if a := r.Status.AppliedThrottle; a != nil && !r.IsFinished() {
		if applied := formatThrottle(a); applied != s {
			s += " (runner: " + applied + ")"
		}
	}
	return s
}

func printReport(w io.Writer, rep *StatusReport, output string, all bool) error {
	switch output {
	case "json":
		b, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return fmt.Errorf("encode status as JSON: %w", err)
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	case "yaml":
		b, err := yaml.Marshal(rep)
		if err != nil {
			return fmt.Errorf("encode status as YAML: %w", err)
		}
		_, err = w.Write(b)
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	nsCol := func(ns string) string {
		if all {
			return ns + "\t"
		}
		return ""
	}
	nsHead := ""
	if all {
		nsHead = "NAMESPACE\t"
	}
	now := time.Now()
	if len(rep.Policies) > 0 {
		fmt.Fprintln(tw, nsHead+"POLICY\tSCHEDULE\tWINDOW\tSUSPEND\tACTIVE\tLAST RESULT\tNEXT RUN\tREADY")
		for _, p := range rep.Policies {
			fmt.Fprintf(tw, "%s%s\t%s\t%s\t%t\t%s\t%s\t%s\t%s\n", nsCol(p.Namespace), p.Name, dash(p.Schedule), dash(p.Window),
				p.Suspended, dash(strings.Join(p.Active, ",")), dash(p.LastResult), until(p.NextRun, now), dash(p.Ready))
		}
		fmt.Fprintln(tw)
	}
	if len(rep.Runs) == 0 {
		fmt.Fprintln(tw, "No runs.")
		return tw.Flush()
	}
	fmt.Fprintln(tw, nsHead+"RUN\tPOLICY\tPHASE\tREASON\tTABLE\tPROGRESS\tPAGES/S\tTHROTTLE\tFG-P99\tWINDOW\tAGE")
	for _, r := range rep.Runs {
		phase := r.Phase
		if r.Paused && r.Phase == string(vacuumv1alpha1.RunRunning) {
			phase += " (paused)"
		}
		progress := fmt.Sprintf("%d%%", r.Percent)
		if r.VacuumPhase != "" && r.Phase == string(vacuumv1alpha1.RunRunning) {
			progress += " " + r.VacuumPhase
		}
		window := "-"
		if r.WindowStopAt != nil {
			window = "closes " + until(r.WindowStopAt, now)
		}
		fmt.Fprintf(tw, "%s%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", nsCol(r.Namespace), r.Name, dash(r.Policy), phase,
			dash(r.Reason), dash(r.Table), progress, r.PagesPerSecond, r.Throttle, dash(r.ForegroundP99), window,
			duration.HumanDuration(now.Sub(r.Created.Time)))
	}
	return tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// until is a time as "in 5m" or "3m ago".
func until(t *metav1.Time, now time.Time) string {
	if t == nil {
		return "-"
	}
	if d := t.Sub(now); d >= 0 {
		return "in " + duration.HumanDuration(d)
	}
	return duration.HumanDuration(now.Sub(t.Time)) + " ago"
}
