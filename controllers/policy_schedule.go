package controllers

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
)

// Schedules. Nothing is kept in memory: each reconcile works out from status
// (lastScheduleTime) and the clock which tick is due, and asks to be requeued at the next
// one, so restarts and leader changes lose nothing. As in Kubernetes' CronJob controller,
// only the most recent missed tick is started; older ones are reported in an event.

// maxCountedTicks bounds the walk over missed ticks; past it, the most recent one is found
// by looking back from now.
const maxCountedTicks = 100

var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// windowSecondsParser is cronParser with an optional leading seconds field (a test's windows,
// PolicyReconciler.WindowScheduleSeconds).
var windowSecondsParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// timeZoneError is a policy time zone the controller cannot load.
type timeZoneError struct {
	zone string
	err  error
}

func (e *timeZoneError) Error() string { return fmt.Sprintf("unknown time zone %q: %v", e.zone, e.err) }
func (e *timeZoneError) Unwrap() error { return e.err }

// scheduleErrorReason is the Ready reason for an error of parseSchedule.
func scheduleErrorReason(err error) string {
	var tz *timeZoneError
	if errors.As(err, &tz) {
		return vacuumv1alpha1.ReasonInvalidTimeZone
	}
	return vacuumv1alpha1.ReasonInvalidSchedule
}

// parseSchedule reads the policy's cron expression in its time zone.
func parseSchedule(p *vacuumv1alpha1.VacuumPolicy) (cron.Schedule, error) {
	loc, err := p.Location()
	if err != nil {
		return nil, &timeZoneError{zone: p.Spec.TimeZone, err: err}
	}
	s := strings.TrimSpace(p.Spec.Schedule)
	if strings.HasPrefix(s, "TZ=") || strings.HasPrefix(s, "CRON_TZ=") {
		return nil, fmt.Errorf("schedule %q: set the time zone in spec.timeZone, not in the schedule", s)
	}
	sched, err := cronParser.Parse("CRON_TZ=" + loc.String() + " " + s)
	if err != nil {
		return nil, fmt.Errorf("schedule %q: %w", s, err)
	}
	return sched, nil
}

// tickSlack is added to the wait for the next tick. The work queue wakes a policy at or after
// the time asked, so the tick is due when it wakes; the slack only keeps a clock read a hair
// early from finding it not yet due (which costs one more reconcile, never a missed tick).
// Every moment of it is added to each run's start.
const tickSlack = 20 * time.Millisecond

// dueTick is the outcome of looking for missed ticks.
type dueTick struct {
	Tick   time.Time // the most recent tick in (earliest, now]; zero when none
	Missed int       // how many ticks fell in (earliest, now], capped past maxCountedTicks
}

// mostRecentTick finds the latest tick after earliest and not after now.
func mostRecentTick(sched cron.Schedule, earliest, now time.Time) dueTick {
	var d dueTick
	for t := sched.Next(earliest); !t.IsZero() && !t.After(now); t = sched.Next(t) {
		d.Tick = t
		d.Missed++
		if d.Missed > maxCountedTicks {
			d.Tick = latestTickBefore(sched, now)
			return d
		}
	}
	return d
}

// nextTick is the first tick after now of the ticks counted from earliest, as Kubernetes'
// CronJob controller counts them. For a cron expression it is sched.Next(now); for "@every D"
// it is not: sched.Next(now) is now+D, so a policy reconciled between two ticks (its run's
// progress, a restart) pushed its next tick out to D after that reconcile, started it late,
// and wrote a new status.nextScheduleTime on every reconcile, whose own update woke it again.
func nextTick(sched cron.Schedule, earliest, now time.Time) time.Time {
	t := sched.Next(earliest)
	for i := 0; !t.IsZero() && !t.After(now); i++ {
		if i == maxCountedTicks {
			return sched.Next(now) // a long way behind, as mostRecentTick gives up counting
		}
		t = sched.Next(t)
	}
	return t
}

// latestTickBefore finds the last tick not after now by looking back over growing windows,
// so a schedule that ticks every minute and was missed for a year costs little.
func latestTickBefore(sched cron.Schedule, now time.Time) time.Time {
	for _, w := range []time.Duration{time.Minute, time.Hour, 24 * time.Hour, 32 * 24 * time.Hour, 367 * 24 * time.Hour} {
		var last time.Time
		for t := sched.Next(now.Add(-w)); !t.IsZero() && !t.After(now); t = sched.Next(t) {
			last = t
		}
		if !last.IsZero() {
			return last
		}
	}
	return time.Time{}
}

// scheduledRunName is the run of a tick: derived from the tick, so a retry never duplicates.
// A tick on a whole minute is named by its minute, as a CronJob's jobs are; one between
// minutes (an @every schedule, or a test's window with seconds) by its second, so two ticks
// of one minute get two runs.
func scheduledRunName(p *vacuumv1alpha1.VacuumPolicy, tick time.Time) string {
	if tick.Second() != 0 {
		return fmt.Sprintf("%s-%d", p.Name, tick.Unix())
	}
	return fmt.Sprintf("%s-%d", p.Name, tick.Unix()/60)
}
