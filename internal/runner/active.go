package runner

import (
	"github.com/vacuumops/vacuum-operator/internal/engine/vacuum"
	"github.com/vacuumops/vacuum-operator/internal/runner/runnerwire"
)

// active is a run in progress as the HTTP endpoints see it: the engine's vacuum of a data
// directory, or an online vacuum of a server (*online.Run).
type active interface {
	Progress() runnerwire.Progress
	UpdateThrottle(runnerwire.Limits) error
	// ThrottleApplies is runnerwire.ThrottleAppliesImmediately or ...NextTable.
	ThrottleApplies() string
}

// adapter is a run whose adaptive throttle can change live (an online run: the engine
// server runs it).
type adapter interface {
	UpdateAdaptive(runnerwire.AdaptiveTargets) error
}

// pauser is a run that can be paused at its next delay point (the engine's; an online run
// cannot hold a server's VACUUM).
type pauser interface {
	// SetPaused pauses or resumes the run; it reports whether that changed anything.
	SetPaused(paused bool) bool
}

// engineRun adapts the engine's run.
type engineRun struct{ r *vacuum.Batch }

func (e engineRun) Progress() runnerwire.Progress {
	p := progressFrom(e.r.Progress())
	st := e.r.ThrottleStats()
	p.Paused, p.PausedSeconds = st.Paused, st.PausedFor.Seconds()
	return p
}

// SetPaused pauses the engine's run at every worker's next delay point, or resumes it.
func (e engineRun) SetPaused(paused bool) bool {
	if paused {
		return e.r.Pause()
	}
	return e.r.Resume()
}

func (e engineRun) UpdateThrottle(l runnerwire.Limits) error {
	return e.r.UpdateThrottle(settingsFrom(l))
}

func (e engineRun) ThrottleApplies() string { return runnerwire.ThrottleAppliesImmediately }
