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

// engineRun adapts the engine's run.
type engineRun struct{ r *vacuum.Batch }

func (e engineRun) Progress() runnerwire.Progress { return progressFrom(e.r.Progress()) }

func (e engineRun) UpdateThrottle(l runnerwire.Limits) error {
	return e.r.UpdateThrottle(settingsFrom(l))
}

func (e engineRun) ThrottleApplies() string { return runnerwire.ThrottleAppliesImmediately }
