package controllers

import (
	"fmt"
	"hash/fnv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
)

// Windows. A window opens at each tick of spec.window.schedule (read in spec.timeZone) and
// closes durationSeconds later on the wall clock of that zone, so a 01:00-05:00 window is
// 01:00-05:00 local time also on the days the clocks change (an hour shorter in spring, an
// hour longer in autumn). Runs start only inside a window:
//   - without spec.schedule, each opening is a tick;
//   - with it, a tick inside a window starts at once and a tick outside waits for the next
//     opening; while it waits, a later tick replaces it (only the latest waiting tick runs).
//
// With jitter, a policy starts at a fixed offset into each window (under half of it) derived
// from a hash of its namespace and name. Each run is given the window's end (RunSpec stopAt)
// and its grace; nothing is kept in memory, so a restarted manager works it all out again
// from status.lastScheduleTime and the clock.

// window is a policy's spec.window made ready for arithmetic.
type window struct {
	openings cron.Schedule
	loc      *time.Location
	duration time.Duration // on the wall clock of loc
	jitter   time.Duration
	grace    time.Duration
}

// parseWindow reads the policy's window in its time zone, its schedule with parser.
func parseWindow(p *vacuumv1alpha1.VacuumPolicy, parser cron.Parser) (*window, error) {
	w := p.Spec.Window
	loc, err := p.Location()
	if err != nil {
		return nil, &timeZoneError{zone: p.Spec.TimeZone, err: err}
	}
	s := strings.TrimSpace(w.Schedule)
	if strings.HasPrefix(s, "TZ=") || strings.HasPrefix(s, "CRON_TZ=") {
		return nil, fmt.Errorf("window schedule %q: set the time zone in spec.timeZone, not in the schedule", s)
	}
	sched, err := parser.Parse("CRON_TZ=" + loc.String() + " " + s)
	if err != nil {
		return nil, fmt.Errorf("window schedule %q: %w", s, err)
	}
	if w.DurationSeconds <= 0 {
		return nil, fmt.Errorf("window durationSeconds %d: must be positive", w.DurationSeconds)
	}
	out := &window{openings: wallClock(sched, loc), loc: loc, duration: time.Duration(w.DurationSeconds) * time.Second, grace: w.StopGracePeriod()}
	if w.Jitter {
		out.jitter = jitterOffset(p.Namespace, p.Name, out.duration)
	}
	return out, nil
}

// jitterOffset is a policy's start offset inside its windows: a hash of namespace/name
// reduced to whole seconds under half the window, so it is the same on every manager and
// every restart, and leaves the policy at least half of each window.
func jitterOffset(namespace, name string, duration time.Duration) time.Duration {
	span := int64(duration / time.Second / 2)
	if span <= 0 {
		return 0
	}
	h := fnv.New64a()
	h.Write([]byte(namespace + "/" + name))
	return time.Duration(h.Sum64()%uint64(span)) * time.Second
}

// end is when the window that opened at open closes: durationSeconds later on the wall clock
// of the policy's zone. time.Date normalises a wall-clock time that falls in a spring gap
// forward, and takes the first of the two in an autumn repeat.
func (w *window) end(open time.Time) time.Time {
	t := open.In(w.loc)
	if ws, ok := w.openings.(*wallOpenings); ok {
		t = ws.intended(open)
	}
	return time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond()+int(w.duration), w.loc)
}

// containing returns the opening of the window t falls in, if it falls in one.
func (w *window) containing(t time.Time) (time.Time, bool) {
	open := latestTickBefore(w.openings, t)
	if open.IsZero() || !t.Before(w.end(open)) {
		return time.Time{}, false
	}
	return open, true
}

// slot is where a tick runs: the window's opening, when the run starts, when it must stop.
type slot struct {
	Open, Start, StopAt time.Time
}

// slotFor is the slot a tick at t runs in: the window t falls in (starting no earlier than
// the jitter offset), else the next window to open.
func (w *window) slotFor(t time.Time) slot {
	if open, ok := w.containing(t); ok {
		start := open.Add(w.jitter)
		if t.After(start) {
			start = t
		}
		return slot{Open: open, Start: start, StopAt: w.end(open)}
	}
	open := w.openings.Next(t)
	return slot{Open: open, Start: open.Add(w.jitter), StopAt: w.end(open)}
}

// overlaps says whether the window opening at open is still open at the next opening; the
// controller refuses such a window, since a run could not tell which window it belongs to.
func (w *window) overlaps(open time.Time) bool {
	next := w.openings.Next(open)
	return !next.IsZero() && w.end(open).After(next)
}

// estimateWindowsLeft is how many more windows a table needs when windows windows have
// brought it to done per mille: at the same pace, rounded up (0 when it is done; 0 too when
// no progress was made yet, as the pace is then unknown).
func estimateWindowsLeft(windows, done int32) int32 {
	if done <= 0 || done >= 1000 || windows <= 0 {
		return 0
	}
	left := int64(1000-done) * int64(windows)
	return int32((left + int64(done) - 1) / int64(done))
}

// wallOpenings are a cron schedule's ticks on the wall clock of loc, as cron(8) runs jobs
// at fixed times: robfig/cron skips a time that falls in a spring-forward gap (a 02:30
// window would not open that night) and fires twice for a time in an autumn repeat (two
// windows in one night). Here an opening in a gap opens at the gap's end (03:00 for a
// 02:30 opening, still closing at 02:30 plus its duration), and the second of two equal
// wall-clock times is skipped. Schedules that tick more than once an hour lose the repeated
// hour's second ticks too, which a window schedule does not miss.
type wallOpenings struct {
	inner *cron.SpecSchedule
	loc   *time.Location
}

func wallClock(s cron.Schedule, loc *time.Location) cron.Schedule {
	spec, ok := s.(*cron.SpecSchedule)
	if !ok {
		return s // @every: elapsed time, no wall clock
	}
	return &wallOpenings{inner: spec, loc: loc}
}

// Next is the first opening after t.
func (w *wallOpenings) Next(t time.Time) time.Time {
	n := w.inner.Next(t)
	for cur := t; ; {
		_, end := cur.In(w.loc).ZoneBounds()
		if end.IsZero() || !end.After(t) || (!n.IsZero() && !end.Before(n)) {
			break
		}
		if _, ok := w.gapOpening(end); ok {
			return end
		}
		cur = end
	}
	if !n.IsZero() && w.repeated(n) {
		return w.Next(n)
	}
	return n
}

// gapOpening says whether a tick fell in the spring-forward gap that ends at g, and returns
// its intended wall-clock time (in the offset before the gap).
func (w *wallOpenings) gapOpening(g time.Time) (time.Time, bool) {
	_, before := g.Add(-time.Second).In(w.loc).Zone()
	_, after := g.In(w.loc).Zone()
	if after <= before {
		return time.Time{}, false
	}
	fixed := *w.inner
	fixed.Location = time.FixedZone("before", before)
	f := fixed.Next(g.Add(-time.Second))
	if f.IsZero() || f.Before(g) || !f.Before(g.Add(time.Duration(after-before)*time.Second)) {
		return time.Time{}, false
	}
	return f.In(fixed.Location), true
}

// repeated says whether n is the second of two ticks at the same wall-clock time (autumn).
func (w *wallOpenings) repeated(n time.Time) bool {
	start, _ := n.In(w.loc).ZoneBounds()
	if start.IsZero() {
		return false
	}
	_, now := n.In(w.loc).Zone()
	_, prev := start.Add(-time.Second).In(w.loc).Zone()
	delta := time.Duration(prev-now) * time.Second
	if delta <= 0 || n.Sub(start) >= delta {
		return false
	}
	e := n.Add(-delta)
	return w.inner.Next(e.Add(-time.Second)).Equal(e)
}

// intended is the wall-clock time an opening stands for: its own, or for an opening at the
// end of a gap, the time in the gap it replaces.
func (w *wallOpenings) intended(open time.Time) time.Time {
	if f, ok := w.gapOpening(open); ok {
		return f
	}
	return open.In(w.loc)
}
