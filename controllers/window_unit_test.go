package controllers

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
	"github.com/vacuumops/vacuum-operator/internal/runner/runnerwire"
)

func mustWindow(t *testing.T, schedule, tz string, seconds int64, jitter bool) *window {
	t.Helper()
	p := &vacuumv1alpha1.VacuumPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "nightly"}}
	p.Spec.TimeZone = tz
	p.Spec.Window = &vacuumv1alpha1.Window{Schedule: schedule, DurationSeconds: seconds, Jitter: jitter}
	w, err := parseWindow(p, cronParser)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func utc(y int, m time.Month, d, h, mi int) time.Time {
	return time.Date(y, m, d, h, mi, 0, 0, time.UTC)
}

// Europe/Berlin changes its clocks on the last Sundays of March (02:00 CET -> 03:00 CEST) and
// October (03:00 CEST -> 02:00 CET); in 2026 they are March 29 and October 25.
func TestWindowsFollowTheWallClockOnBothClockChangesOfBerlin(t *testing.T) {
	for _, c := range []struct {
		name             string
		schedule         string
		seconds          int64
		from             time.Time
		wantOpen, wantTo time.Time
	}{
		{"01:00 for 4h, the night before spring: 4h", "0 1 * * *", 4 * 3600, utc(2026, 3, 27, 12, 0), utc(2026, 3, 28, 0, 0), utc(2026, 3, 28, 4, 0)},
		{"01:00 for 4h, spring: closes at 05:00 CEST, 3h later", "0 1 * * *", 4 * 3600, utc(2026, 3, 28, 12, 0), utc(2026, 3, 29, 0, 0), utc(2026, 3, 29, 3, 0)},
		{"01:00 for 4h, autumn: closes at 05:00 CET, 5h later", "0 1 * * *", 4 * 3600, utc(2026, 10, 24, 12, 0), utc(2026, 10, 24, 23, 0), utc(2026, 10, 25, 4, 0)},
		{"02:30 for 2h, spring: 02:30 does not exist, opens at 03:00 CEST, closes 04:30 CEST", "30 2 * * *", 2 * 3600, utc(2026, 3, 28, 12, 0), utc(2026, 3, 29, 1, 0), utc(2026, 3, 29, 2, 30)},
		{"02:30 for 2h, autumn: opens at the first 02:30 (CEST), closes 04:30 CET", "30 2 * * *", 2 * 3600, utc(2026, 10, 24, 12, 0), utc(2026, 10, 25, 0, 30), utc(2026, 10, 25, 3, 30)},
		{"02:30 for 2h, the day after autumn", "30 2 * * *", 2 * 3600, utc(2026, 10, 25, 0, 30), utc(2026, 10, 26, 1, 30), utc(2026, 10, 26, 3, 30)},
		{"Sundays 02:30, spring Sunday still has its window", "30 2 * * 0", 3600, utc(2026, 3, 28, 12, 0), utc(2026, 3, 29, 1, 0), utc(2026, 3, 29, 1, 30)},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := mustWindow(t, c.schedule, "Europe/Berlin", c.seconds, false)
			open := w.openings.Next(c.from)
			if !open.Equal(c.wantOpen) || !w.end(open).Equal(c.wantTo) {
				t.Errorf("window %s - %s, want %s - %s", open.UTC(), w.end(open).UTC(), c.wantOpen, c.wantTo)
			}
			if got, ok := w.containing(open.Add(time.Minute)); !ok || !got.Equal(open) {
				t.Errorf("a minute after the opening is not in that window (%s, %t)", got, ok)
			}
			if _, ok := w.containing(w.end(open)); ok {
				t.Errorf("the window's end is still inside it")
			}
		})
	}
}

func TestTheAutumnRepeatOpensOneWindowNotTwo(t *testing.T) {
	w := mustWindow(t, "30 2 * * *", "Europe/Berlin", 1800, false)
	var opens []time.Time
	for o := w.openings.Next(utc(2026, 10, 24, 12, 0)); o.Before(utc(2026, 10, 26, 12, 0)); o = w.openings.Next(o) {
		opens = append(opens, o)
	}
	if len(opens) != 2 || !opens[0].Equal(utc(2026, 10, 25, 0, 30)) || !opens[1].Equal(utc(2026, 10, 26, 1, 30)) {
		t.Errorf("openings %v, want 2026-10-25 00:30Z and 2026-10-26 01:30Z", opens)
	}
}

func TestJitterIsTheSameForAPolicyEveryTimeAndInsideTheFirstHalfOfTheWindow(t *testing.T) {
	d := time.Hour
	seen := map[time.Duration]bool{}
	for i := range 50 {
		name := fmt.Sprintf("policy-%d", i)
		j := jitterOffset("shop", name, d)
		if j != jitterOffset("shop", name, d) {
			t.Fatalf("%s: two offsets for one policy", name)
		}
		if j < 0 || j >= d/2 || j%time.Second != 0 {
			t.Fatalf("%s: offset %s outside [0, 30m) in whole seconds", name, j)
		}
		seen[j] = true
	}
	if len(seen) < 40 {
		t.Errorf("50 policies share %d offsets: the jitter does not spread them", len(seen))
	}
	if jitterOffset("shop", "a", time.Second) != 0 {
		t.Error("a one-second window has room for no offset")
	}
	w := mustWindow(t, "0 2 * * *", "UTC", 3600, true)
	if w.jitter != jitterOffset("shop", "nightly", time.Hour) {
		t.Errorf("window jitter %s", w.jitter)
	}
	if s := w.slotFor(utc(2026, 5, 1, 2, 0)); !s.Start.Equal(utc(2026, 5, 1, 2, 0).Add(w.jitter)) || !s.StopAt.Equal(utc(2026, 5, 1, 3, 0)) {
		t.Errorf("slot %+v: the start is not the opening plus the offset", s)
	}
}

func TestATickOutsideTheWindowWaitsForTheNextOpeningAndOneInsideStartsAtOnce(t *testing.T) {
	w := mustWindow(t, "0 2 * * *", "UTC", 3600, false)
	for _, c := range []struct {
		tick, start, stop time.Time
	}{
		{utc(2026, 5, 1, 1, 0), utc(2026, 5, 1, 2, 0), utc(2026, 5, 1, 3, 0)},
		{utc(2026, 5, 1, 2, 20), utc(2026, 5, 1, 2, 20), utc(2026, 5, 1, 3, 0)},
		{utc(2026, 5, 1, 3, 0), utc(2026, 5, 2, 2, 0), utc(2026, 5, 2, 3, 0)},
	} {
		if s := w.slotFor(c.tick); !s.Start.Equal(c.start) || !s.StopAt.Equal(c.stop) {
			t.Errorf("tick %s: slot %s - %s, want %s - %s", c.tick, s.Start, s.StopAt, c.start, c.stop)
		}
	}
	long := mustWindow(t, "0 * * * *", "UTC", 2*3600, false)
	if !long.overlaps(utc(2026, 5, 1, 2, 0)) || w.overlaps(utc(2026, 5, 1, 2, 0)) {
		t.Error("overlap of windows misjudged")
	}
}

func TestWindowsLeftAreEstimatedAtThePaceSoFar(t *testing.T) {
	for _, c := range []struct{ windows, done, want int32 }{
		{1, 400, 2}, {1, 500, 1}, {2, 500, 2}, {3, 333, 7}, {1, 0, 0}, {1, 1000, 0}, {4, 999, 1},
	} {
		if got := estimateWindowsLeft(c.windows, c.done); got != c.want {
			t.Errorf("%d windows, %d per mille: %d left, want %d", c.windows, c.done, got, c.want)
		}
	}
}

func TestTheRunSpecCarriesTheWindowsEndAndResumeOnlyWhenSet(t *testing.T) {
	run := &vacuumv1alpha1.VacuumRun{}
	run.Spec.Target.PersistentVolumeClaim = "data"
	_, _, plain, err := resolvedSpec(&run.Spec.VacuumSpec, "uid")
	if err != nil {
		t.Fatal(err)
	}
	_, _, same, err := resolveAndEncode(windowEdit(run), &run.Spec.VacuumSpec, "uid")
	if err != nil || string(same) != string(plain) {
		t.Fatalf("a run without a window had its RunSpec changed: %s", same)
	}
	run.Spec.Window = &vacuumv1alpha1.RunWindow{StopAt: metav1.NewTime(time.Date(2026, 5, 1, 3, 0, 0, 0, time.FixedZone("x", 3600)))}
	run.Spec.Resume = true
	_, res, out, err := resolveAndEncode(windowEdit(run), &run.Spec.VacuumSpec, "uid")
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	if got["stopAt"] != "2026-05-01T02:00:00Z" || got["resume"] != true || got["dataDir"] != runnerwire.DefaultDataDir {
		t.Errorf("RunSpec %s: want stopAt 2026-05-01T02:00:00Z, resume true and the rest kept", out)
	}
	if !res.StopAt.Equal(time.Date(2026, 5, 1, 2, 0, 0, 0, time.UTC)) || !res.Resume {
		t.Errorf("the runner's own Resolve reads stopAt %s, resume %t", res.StopAt, res.Resume)
	}
}

// windowSummary is a runner's termination message: its Summary with a stop reason and the
// tables' positions.
func windowSummary(stopReason string, tables ...runnerwire.TableResult) string {
	sum := runnerwire.Summary{Phase: runnerwire.SummarySucceeded, Message: "vacuumed", StopReason: stopReason}
	for _, t := range tables {
		t.Mode, t.PagesScanned, t.TuplesRemoved = runnerwire.ModeLazy, 100, 10
		sum.Tables = append(sum.Tables, t)
		sum.Totals.TuplesRemoved += t.TuplesRemoved
	}
	b, err := json.Marshal(sum)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func TestTheRunnersGoldenWindowClosedSummaryEndsTheRunInterrupted(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(goldenDir, "summary-window-closed.json"))
	if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: runnerContainer, State: corev1.ContainerState{
		Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Message: string(b)}}}}
	end, _ := containerEnd(pod)
	v, reason, msg := judge(end, false)
	if v, reason, _ = windowVerdict(end, v, reason, msg); v != verdictInterrupted || reason != vacuumv1alpha1.ReasonWindowClosed {
		t.Fatalf("verdict %d reason %s, want Interrupted WindowClosed", v, reason)
	}
	run := &vacuumv1alpha1.VacuumRun{}
	run.Spec.Window = &vacuumv1alpha1.RunWindow{}
	foldEnd(run, end)
	var stopped *vacuumv1alpha1.TableStatus
	for i := range run.Status.Tables {
		if !ptr.Deref(run.Status.Tables[i].Complete, true) {
			stopped = &run.Status.Tables[i]
		}
	}
	if stopped == nil || ptr.Deref(stopped.BlockReached, 0) <= 0 || ptr.Deref(stopped.DonePerMille, 0) <= 0 || ptr.Deref(stopped.DonePerMille, 0) >= 1000 {
		t.Errorf("tables %+v: want one stopped with its block and a share between 0 and 1000", run.Status.Tables)
	}
}

func TestAStoppedRunnersSummaryEndsTheRunInterruptedWithEachTablesPosition(t *testing.T) {
	pod := &corev1.Pod{}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: runnerContainer, State: corev1.ContainerState{
		Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Message: windowSummary(runnerwire.StopReasonWindowClosed,
			runnerwire.TableResult{Table: "orders", PagesTotal: 1000, Complete: false, BlockReached: 400, ResumedFromBlock: 100},
			runnerwire.TableResult{Table: "events", PagesTotal: 50, Complete: true, BlockReached: 50})},
	}}}
	end, ok := containerEnd(pod)
	if !ok {
		t.Fatal("no end")
	}
	v, reason, _ := judge(end, false)
	if v, reason, _ = windowVerdict(end, v, reason, ""); v != verdictInterrupted || reason != vacuumv1alpha1.ReasonWindowClosed {
		t.Fatalf("verdict %d reason %s, want Interrupted WindowClosed", v, reason)
	}
	run := &vacuumv1alpha1.VacuumRun{}
	run.Spec.Window = &vacuumv1alpha1.RunWindow{}
	foldEnd(run, end)
	st := run.Status
	if len(st.Tables) != 2 {
		t.Fatalf("tables %+v", st.Tables)
	}
	orders, events := st.Tables[0], st.Tables[1]
	if ptr.Deref(orders.Complete, true) || ptr.Deref(orders.BlockReached, 0) != 400 || ptr.Deref(orders.ResumedFromBlock, 0) != 100 ||
		ptr.Deref(orders.DonePerMille, 0) != 400 || orders.Percent != 40 {
		t.Errorf("orders %+v", orders)
	}
	if !ptr.Deref(events.Complete, false) || ptr.Deref(events.DonePerMille, 0) != 1000 {
		t.Errorf("events %+v", events)
	}
	if st.Percent != 70 || st.VacuumPhase != "stopped" {
		t.Errorf("run percent %d phase %q, want 70 (the mean of 40%% and 100%%) and stopped", st.Percent, st.VacuumPhase)
	}

	pod.Status.ContainerStatuses[0].State.Terminated.Message = windowSummary(runnerwire.StopReasonWindowTooShort,
		runnerwire.TableResult{Table: "orders", PagesTotal: 1000, Complete: false, BlockReached: 0})
	end, _ = containerEnd(pod)
	v, reason, _ = judge(end, false)
	if v, reason, _ = windowVerdict(end, v, reason, ""); v != verdictInterrupted || reason != vacuumv1alpha1.ReasonWindowTooShort {
		t.Errorf("verdict %d reason %s, want Interrupted WindowTooShort", v, reason)
	}
	pod.Status.ContainerStatuses[0].State.Terminated.Message = windowSummary("", runnerwire.TableResult{Table: "orders", Complete: true})
	end, _ = containerEnd(pod)
	if v, _, _ = judge(end, false); v != verdictSucceeded {
		t.Errorf("a summary without a stop reason is verdict %d, want Succeeded", v)
	}
}

func TestAWindowOnlyPolicysIntervalIsTheTimeBetweenOpenings(t *testing.T) {
	p := &vacuumv1alpha1.VacuumPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "nightly"}}
	p.Spec.Window = &vacuumv1alpha1.Window{Schedule: "0 2 * * *", DurationSeconds: 3600}
	r := &PolicyReconciler{Clock: realClock}
	if got := r.scheduleInterval(p); got != 24*time.Hour {
		t.Errorf("interval %s, want 24h (the time between two openings)", got)
	}
}

func TestASecondsWindowScheduleOpensWindowsSecondsApartEachWithItsOwnRun(t *testing.T) {
	p := &vacuumv1alpha1.VacuumPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "nightly"}}
	p.Spec.TimeZone = "UTC"
	p.Spec.Window = &vacuumv1alpha1.Window{Schedule: "*/12 * * * * *", DurationSeconds: 9}
	if _, err := parseWindow(p, cronParser); err == nil {
		t.Fatal("a six-field window schedule parsed without WindowScheduleSeconds")
	}
	r := &PolicyReconciler{WindowScheduleSeconds: true}
	w, err := parseWindow(p, r.windowParser())
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 2, 5, 0, 5, 0, time.UTC)
	s := w.slotFor(at)
	if want := time.Date(2026, 12, 2, 5, 0, 0, 0, time.UTC); !s.Open.Equal(want) || !s.StopAt.Equal(want.Add(9*time.Second)) {
		t.Errorf("slot at %s is %+v, want the window 05:00:00-05:00:09", at, s)
	}
	next := w.slotFor(at.Add(5 * time.Second)) // 05:00:10, between windows
	if want := time.Date(2026, 12, 2, 5, 0, 12, 0, time.UTC); !next.Start.Equal(want) {
		t.Errorf("slot at 05:00:10 starts %s, want %s", next.Start, want)
	}
	names := map[string]bool{}
	for _, tick := range []time.Time{s.Open, next.Open, next.Open.Add(12 * time.Second)} {
		names[scheduledRunName(p, tick)] = true
	}
	if len(names) != 3 {
		t.Errorf("three windows of one minute got the runs %v, want three names", names)
	}
	if got, want := scheduledRunName(p, s.Open), fmt.Sprintf("nightly-%d", s.Open.Unix()/60); got != want {
		t.Errorf("a tick on a whole minute is %s, want %s (named by its minute)", got, want)
	}
	p.Spec.Window.Schedule = "0 2 * * *"
	if w5, err := parseWindow(p, r.windowParser()); err != nil || !w5.openings.Next(at).Equal(time.Date(2026, 12, 3, 2, 0, 0, 0, time.UTC)) {
		t.Errorf("a five-field schedule reads differently with seconds allowed: %v", err)
	}
}

func TestASucceededFullsRateIsGivenToTheNextWindowsRunForItsEstimate(t *testing.T) {
	p := &vacuumv1alpha1.VacuumPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "nightly"}}
	p.Spec.TimeZone = "UTC"
	p.Spec.Mode = vacuumv1alpha1.VacuumModeFull
	p.Spec.Window = &vacuumv1alpha1.Window{Schedule: "0 2 * * *", DurationSeconds: 3600}
	ended := func(name string, phase vacuumv1alpha1.RunPhase, pagesPerSecond int64) vacuumv1alpha1.VacuumRun {
		r := vacuumv1alpha1.VacuumRun{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name}}
		r.Spec.Mode = vacuumv1alpha1.VacuumModeFull
		r.Status.Phase, r.Status.PagesPerSecond = phase, pagesPerSecond
		return r
	}
	runs := []vacuumv1alpha1.VacuumRun{ended("nightly-1", vacuumv1alpha1.RunSucceeded, 120)}
	observeWindows(p, runs)
	if got := p.Status.Window.LastFullPagesPerSecond; got != 120 {
		t.Fatalf("lastFullPagesPerSecond %d after a FULL at 120 pages/s, want 120", got)
	}
	// A FULL refused as too long (no pages processed) keeps the measured rate.
	runs = append(runs, ended("nightly-2", vacuumv1alpha1.RunInterrupted, 0))
	observeWindows(p, runs)
	if got := p.Status.Window.LastFullPagesPerSecond; got != 120 {
		t.Fatalf("lastFullPagesPerSecond %d after a refused FULL, want 120 kept", got)
	}
	edit := runNowWindow(p, cronParser, time.Date(2026, 12, 2, 2, 30, 0, 0, time.UTC))
	if edit == nil {
		t.Fatal("no window for a run made inside one")
	}
	run := &vacuumv1alpha1.VacuumRun{}
	edit(run)
	if run.Spec.Window.FullPagesPerSecond != 120 {
		t.Fatalf("the run's window says %d pages/s, want 120", run.Spec.Window.FullPagesPerSecond)
	}
	var rs runnerwire.RunSpec
	applyWindow(run, &rs)
	if rs.FullPagesPerSecond != 120 || rs.StopAt == nil {
		t.Errorf("RunSpec fullPagesPerSecond %d stopAt %v, want 120 and the window's end", rs.FullPagesPerSecond, rs.StopAt)
	}
}

// A runner pod that started and ended between two reconciles was never seen running: its
// run still gets a start time, the container's, and one already recorded is kept.
func TestAnEndedAttemptNeverSeenRunningGivesTheRunTheContainersStartTime(t *testing.T) {
	started := metav1.NewTime(time.Date(2026, 12, 6, 4, 53, 0, 0, time.UTC))
	pod := &corev1.Pod{}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: runnerContainer, State: corev1.ContainerState{
		Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, StartedAt: started}}}}
	end, ok := containerEnd(pod)
	if !ok {
		t.Fatal("no end")
	}
	run := &vacuumv1alpha1.VacuumRun{}
	foldEnd(run, end)
	if run.Status.StartTime == nil || !run.Status.StartTime.Equal(&started) {
		t.Errorf("startTime %v, want the container's %v", run.Status.StartTime, started)
	}
	seen := metav1.NewTime(started.Add(-time.Second))
	run.Status.StartTime = &seen
	foldEnd(run, end)
	if !run.Status.StartTime.Equal(&seen) {
		t.Errorf("startTime %v, want the one a reconcile recorded, %v", run.Status.StartTime, seen)
	}
}
