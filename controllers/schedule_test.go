package controllers

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
)

func mustSchedule(t *testing.T, expr, tz string) *vacuumv1alpha1.VacuumPolicy {
	t.Helper()
	p := &vacuumv1alpha1.VacuumPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
	p.Spec.Schedule, p.Spec.TimeZone = expr, tz
	return p
}

func TestMostRecentMissedTickIsStartedAndTheOthersCounted(t *testing.T) {
	s, err := parseSchedule(mustSchedule(t, "0 * * * *", "UTC"))
	if err != nil {
		t.Fatal(err)
	}
	earliest := time.Date(2026, 1, 1, 0, 30, 0, 0, time.UTC)
	now := time.Date(2026, 1, 1, 5, 10, 0, 0, time.UTC)
	d := mostRecentTick(s, earliest, now)
	if !d.Tick.Equal(time.Date(2026, 1, 1, 5, 0, 0, 0, time.UTC)) || d.Missed != 5 {
		t.Errorf("tick %s missed %d, want 05:00 and 5", d.Tick, d.Missed)
	}
}

func TestAYearOfMissedMinuteTicksIsCheapAndFindsTheLatest(t *testing.T) {
	s, _ := parseSchedule(mustSchedule(t, "* * * * *", "UTC"))
	now := time.Date(2026, 6, 1, 12, 0, 30, 0, time.UTC)
	start := time.Now()
	d := mostRecentTick(s, now.AddDate(-1, 0, 0), now)
	if !d.Tick.Equal(time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)) || d.Missed <= maxCountedTicks {
		t.Errorf("tick %s missed %d", d.Tick, d.Missed)
	}
	if time.Since(start) > time.Second {
		t.Errorf("took %s", time.Since(start))
	}
}

func TestScheduleIsReadInThePolicyTimeZone(t *testing.T) {
	s, err := parseSchedule(mustSchedule(t, "0 3 * * *", "Europe/Paris"))
	if err != nil {
		t.Fatal(err)
	}
	next := s.Next(time.Date(2026, 1, 10, 0, 0, 0, 0, time.UTC))
	if want := time.Date(2026, 1, 10, 2, 0, 0, 0, time.UTC); !next.Equal(want) { // 03:00 CET
		t.Errorf("next = %s, want %s", next.UTC(), want)
	}
}

func TestBadSchedulesAndTimeZonesAreRefused(t *testing.T) {
	for _, c := range []struct{ expr, tz string }{
		{"61 * * * *", "UTC"}, {"every day", "UTC"}, {"* * * *", "UTC"}, {"0 3 * * *", "Mars/Olympus"},
		{"TZ=UTC 0 3 * * *", "UTC"},
	} {
		if _, err := parseSchedule(mustSchedule(t, c.expr, c.tz)); err == nil {
			t.Errorf("schedule %q in %q accepted", c.expr, c.tz)
		}
	}
	if _, err := parseSchedule(mustSchedule(t, "0 3 * * *", "Mars/Olympus")); scheduleErrorReason(err) != vacuumv1alpha1.ReasonInvalidTimeZone {
		t.Errorf("an unknown zone gives reason %s (%v), want InvalidTimeZone", scheduleErrorReason(err), err)
	}
	if _, err := parseSchedule(mustSchedule(t, "61 * * * *", "UTC")); scheduleErrorReason(err) != vacuumv1alpha1.ReasonInvalidSchedule {
		t.Errorf("a bad cron gives reason %s (%v), want InvalidSchedule", scheduleErrorReason(err), err)
	}
	if _, err := parseSchedule(mustSchedule(t, "@daily", "")); err != nil {
		t.Errorf("@daily refused: %v", err)
	}
}

func TestRunNamesAreDerivedFromTheTick(t *testing.T) {
	p := mustSchedule(t, "* * * * *", "UTC")
	tick := time.Unix(1_800_000_000, 0)
	if got := scheduledRunName(p, tick); got != "p-30000000" {
		t.Errorf("name %q", got)
	}
}
