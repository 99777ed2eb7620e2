package v1alpha1

import (
	"fmt"
	"time"
)

// FormatPerMille writes a ratio given per mille as a multiple with one decimal, rounded to
// the nearest tenth, in integer arithmetic: 1300 -> "1.3x", 1000 -> "1.0x", 2449 -> "2.4x".
func FormatPerMille(pm int64) string {
	if pm < 0 {
		pm = 0
	}
	tenths := (pm + 50) / 100
	return fmt.Sprintf("%d.%dx", tenths/10, tenths%10)
}

// formatMicroseconds writes a latency in microseconds as a duration string ("2.65ms").
func formatMicroseconds(us int64) string {
	return (time.Duration(us) * time.Microsecond).String()
}

// SetForeground writes the foreground's figures over the last interval (latencies in
// microseconds) and, when the baseline had statements, its p99 and the ratio to it. A window
// with no statement leaves the latencies empty: there is nothing to compare.
func (s *VacuumRunStatus) SetForeground(statements, perSecond, p50us, p99us, baselineStatements, baselineP99us int64) {
	f := &ForegroundStatus{StatementsPerSecond: max(perSecond, 0)}
	if statements > 0 {
		f.P50, f.P99 = formatMicroseconds(p50us), formatMicroseconds(p99us)
	}
	if baselineStatements > 0 && baselineP99us > 0 {
		f.BaselineP99 = formatMicroseconds(baselineP99us)
		if statements > 0 {
			pm := (p99us*1000 + baselineP99us/2) / baselineP99us
			f.P99VsBaselinePerMille = &pm
			f.P99VsBaseline = FormatPerMille(pm)
		}
	}
	s.Foreground = f
}
