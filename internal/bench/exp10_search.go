package bench

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// Experiment 10's pure parts: where the fastest fixed cost delay that holds a target lies
// (the grid's bracket, then bisection inside it), the share of 1-second windows that held a
// target, the target chosen from the start's measurements, and the goal's verdict.

// bisectResolution is the finest cost delay the bisection tells apart: the cost delay is
// set in microseconds, and steps finer than this are within the run-to-run noise of the
// figures it decides on.
const bisectResolution = 100 * time.Microsecond

// gridBracket finds, on a grid of increasing cost delays with each delay's measured figure
// (the median of its runs), the smallest delay whose figure is at most target (hi) and the
// delay just below it (lo), which does not hold the target: the grid's previous delay, or,
// when the grid's first delay holds, ceiling, the adaptive runs' static ceiling (at most the
// first delay), which they never go faster than. The bisection never goes below ceiling: a
// fixed delay faster than the adaptive runs may go would win the comparison by construction;
// when ceiling is the grid's first delay and that delay holds, lo is hi and there is nothing
// to bisect. ok is false when no delay of the grid holds the target.
func gridBracket(ceiling time.Duration, delays []time.Duration, figures []float64, target float64) (lo, hi time.Duration, ok bool) {
	for i, d := range delays {
		if i < len(figures) && figures[i] <= target {
			lo = min(ceiling, d)
			if i > 0 {
				lo = delays[i-1]
			}
			return lo, d, true
		}
	}
	return 0, 0, false
}

// bisection narrows the bracket (lo fails the target, hi holds it) of the fastest fixed cost
// delay that holds a target.
type bisection struct {
	lo, hi time.Duration
}

// mid is the delay to measure next, rounded to bisectResolution; ok is false when the
// bracket is already as narrow as that resolution allows.
func (b bisection) mid() (d time.Duration, ok bool) {
	m := (b.lo + b.hi) / 2
	m = m.Round(bisectResolution)
	if m <= b.lo || m >= b.hi {
		return 0, false
	}
	return m, true
}

// update narrows the bracket with the figure measured at mid: a delay that held the target
// is the new hi (faster and still within it), one that did not the new lo.
func (b *bisection) update(mid time.Duration, held bool) {
	if held {
		b.hi = mid
	} else {
		b.lo = mid
	}
}

// point is one observation in time: a transaction's latency (at its end) or a lag sample.
type point struct {
	at time.Time
	v  float64
}

// windowStat is how a window's points are judged against a target: its p99 (latency) or
// its largest value (lag).
type windowStat func([]float64) float64

// p99Stat is the nearest-rank 99th percentile of v (non-empty), as the runs' p99s are.
func p99Stat(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	i := int(0.99*float64(len(s))+0.999999) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// maxStat is the largest of v (non-empty).
func maxStat(v []float64) float64 { return slices.Max(v) }

// windowsHeld splits [start, end] into consecutive windows of width from start and counts
// those whose points' stat is at most target. A rest shorter than half of width joins the
// last window; a longer one is a window of its own. A window without any point did not
// hold: at a fixed rate, a second without a finished transaction is a stalled foreground.
func windowsHeld(pts []point, start, end time.Time, width time.Duration, stat windowStat, target float64) (held, total int) {
	if end.Sub(start) <= 0 || width <= 0 {
		return 0, 0
	}
	for _, in := range splitWindows(pts, start, end, width) {
		total++
		if len(in) > 0 && stat(in) <= target {
			held++
		}
	}
	return held, total
}

// splitWindows splits [start, end] into windows of width, the last stretched or cut to end
// (a rest of half a width or more is a window of its own), and returns the values of the
// points in each.
func splitWindows(pts []point, start, end time.Time, width time.Duration) [][]float64 {
	n := int(end.Sub(start) / width)
	if rest := end.Sub(start) - time.Duration(n)*width; rest >= width/2 || n == 0 {
		n++
	}
	windows := make([][]float64, n)
	for i := range n {
		from, to := start.Add(time.Duration(i)*width), start.Add(time.Duration(i+1)*width)
		last := i == n-1
		if last {
			to = end
		}
		for _, p := range pts {
			if !p.at.Before(from) && (p.at.Before(to) || last && p.at.Equal(to)) {
				windows[i] = append(windows[i], p.v)
			}
		}
	}
	return windows
}

// windowTimeline describes each window of windowsHeld's split of [start, end]: its stat and
// point count (the stat in its points' unit times scale, written with format), then the law's
// polls that fell in it (budget per mille and binding, and {phase} where the VACUUM's phase
// changed), so a run's log shows which windows missed and what the adaptive throttle and
// the VACUUM did in them.
func windowTimeline(pts []point, start, end time.Time, width time.Duration, stat windowStat, scale float64, format string, law []lawPoint) string {
	var b strings.Builder
	phase := ""
	windows := splitWindows(pts, start, end, width)
	for i, in := range windows {
		from, to := start.Add(time.Duration(i)*width), start.Add(time.Duration(i+1)*width)
		last := i == len(windows)-1
		if last {
			to = end
		}
		fmt.Fprintf(&b, "[%d: ", i+1)
		if len(in) > 0 {
			fmt.Fprintf(&b, format+"/%d", stat(in)*scale, len(in))
		} else {
			b.WriteString("none")
		}
		for _, l := range law {
			if !l.at.Before(from) && (l.at.Before(to) || last && !l.at.After(to)) {
				if l.phase != "" && l.phase != phase {
					// The VACUUM's phase where it changes: a foreground held up in one
					// phase whatever the rate is told from one held up by the rate.
					fmt.Fprintf(&b, " {%s}", l.phase)
					phase = l.phase
				}
				fmt.Fprintf(&b, " %d%s", l.perMille, bindingLetter(l.binding))
			}
		}
		b.WriteString("] ")
	}
	return strings.TrimSpace(b.String())
}

// bindingLetter abbreviates a binding for windowTimeline: L(atency), R(eplication lag),
// C(eiling), F(loor), H(ardStop).
func bindingLetter(b string) string {
	if l, ok := map[string]string{"ForegroundLatency": "L", "ReplicationLag": "R", "Ceiling": "C",
		"Floor": "F", "HardStop": "H"}[b]; ok {
		return l
	}
	return "?"
}

// chooseTarget is the target set between the figure the load shows alone and the figure it
// shows beside the unthrottled vacuum: their geometric mean, so that a throttle has to be
// found (the unthrottled vacuum does not hold it) and one exists (the load alone does).
// floor is the smallest figure alone that can be told from zero (a lag of less than one
// WAL page is a standby that keeps up).
func chooseTarget(alone, unthrottled, floor float64) float64 {
	return math.Sqrt(max(alone, floor) * max(unthrottled, floor))
}

// goalVerdict is experiment 10's goal for one target: adaptive throttling held the target
// (its runs' median figure within it) and finished sooner than the fastest fixed cost delay
// that held it (its median time against that delay's median time). With no fixed delay
// that held the target, the adaptive throttle meets the goal by holding it at all.
func goalVerdict(adaptiveSeconds, adaptiveFigure, bestSeconds float64, bestFound bool, target float64) (met bool, why string) {
	switch {
	case adaptiveFigure > target:
		return false, sentence("the adaptive runs' median %.3f is above the target %.3f", adaptiveFigure, target)
	case !bestFound:
		return true, "no fixed cost delay of the grid held the target; the adaptive runs did"
	case adaptiveSeconds < bestSeconds:
		return true, sentence("adaptive %.2f s against %.2f s at the best fixed delay (%.2fx)", adaptiveSeconds, bestSeconds, adaptiveSeconds/bestSeconds)
	default:
		return false, sentence("adaptive %.2f s is not below %.2f s at the best fixed delay (%.2fx)", adaptiveSeconds, bestSeconds, adaptiveSeconds/bestSeconds)
	}
}
