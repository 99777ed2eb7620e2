package adaptive

import "time"

// Targets are the limits an adaptive throttle holds; a zero field is not held.
type Targets struct {
	Latency  time.Duration // the foreground percentile's target
	LagBytes int64         // the largest standby lag in bytes
	LagDelay time.Duration // the largest standby replay lag
}

// Signals are the controller's signals for t, each target that is set in the order
// latency, lag bytes, lag delay: the samples given to Step come in the same order. Latency is
// a level the vacuum's rate raises; lag integrates what the standby has not yet applied.
func (t Targets) Signals() []Signal {
	var out []Signal
	if t.Latency > 0 {
		out = append(out, Signal{Binding: ForegroundLatency, Kind: Level, Target: t.Latency.Seconds()})
	}
	if t.LagBytes > 0 {
		out = append(out, Signal{Binding: ReplicationLag, Kind: Integrating, Target: float64(t.LagBytes)})
	}
	if t.LagDelay > 0 {
		out = append(out, Signal{Binding: ReplicationLag, Kind: Integrating, Target: t.LagDelay.Seconds()})
	}
	return out
}
