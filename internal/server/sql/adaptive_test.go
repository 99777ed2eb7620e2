package sql

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine/vacuum/throttle"
	"github.com/vacuumops/vacuum-operator/internal/server/pgerr"
)

// TestAdaptiveSettingsParseAsDecidedAndRefuseBadValuesWith22023 sets each adaptive
// setting through SET: good values read back through SHOW as written and parse into the
// targets a VACUUM takes; bad ones fail with 22023 and a message naming the setting, the
// value and what is expected.
func TestAdaptiveSettingsParseAsDecidedAndRefuseBadValuesWith22023(t *testing.T) {
	for _, tc := range []struct {
		name, value string
		want        adaptiveTargets // zero: the value is refused
		why         string          // part of the refusal's message
	}{
		{"vacuum_adaptive_latency_target", "5ms", adaptiveTargets{latency: 5 * time.Millisecond, perMille: 990, floor: 100}, ""},
		{"vacuum_adaptive_latency_target", "2", adaptiveTargets{latency: 2 * time.Millisecond, perMille: 990, floor: 100}, ""},
		{"vacuum_adaptive_latency_target", "1.5s", adaptiveTargets{latency: 1500 * time.Millisecond, perMille: 990, floor: 100}, ""},
		{"vacuum_adaptive_latency_target", "0", adaptiveTargets{perMille: 990, floor: 100}, ""},
		{"vacuum_adaptive_latency_target", "fast", adaptiveTargets{}, "a duration"},
		{"vacuum_adaptive_latency_target", "-1ms", adaptiveTargets{}, "a duration"},
		{"vacuum_adaptive_latency_percentile_per_mille", "500", adaptiveTargets{perMille: 500, floor: 100}, ""},
		{"vacuum_adaptive_latency_percentile_per_mille", "999", adaptiveTargets{perMille: 999, floor: 100}, ""},
		{"vacuum_adaptive_latency_percentile_per_mille", "1000", adaptiveTargets{}, "between 500 and 999"},
		{"vacuum_adaptive_latency_percentile_per_mille", "499", adaptiveTargets{}, "between 500 and 999"},
		{"vacuum_adaptive_latency_percentile_per_mille", "99.9", adaptiveTargets{}, "an integer"},
		{"vacuum_adaptive_floor_per_mille", "1", adaptiveTargets{perMille: 990, floor: 1}, ""},
		{"vacuum_adaptive_floor_per_mille", "1000", adaptiveTargets{perMille: 990, floor: 1000}, ""},
		{"vacuum_adaptive_floor_per_mille", "0", adaptiveTargets{}, "between 1 and 1000"},
		{"vacuum_adaptive_max_lag_bytes", "16MB", adaptiveTargets{lagBytes: 16 << 20, perMille: 990, floor: 100}, ""},
		{"vacuum_adaptive_max_lag_bytes", "4096", adaptiveTargets{lagBytes: 4096, perMille: 990, floor: 100}, ""},
		{"vacuum_adaptive_max_lag_bytes", "16 parsecs", adaptiveTargets{}, "valid units"},
		{"vacuum_adaptive_max_lag_bytes", "-1", adaptiveTargets{}, "valid units"},
		{"vacuum_adaptive_max_lag_seconds", "5", adaptiveTargets{lagDelay: 5 * time.Second, perMille: 990, floor: 100}, ""},
		{"vacuum_adaptive_max_lag_seconds", "0.5", adaptiveTargets{lagDelay: 500 * time.Millisecond, perMille: 990, floor: 100}, ""},
		{"vacuum_adaptive_max_lag_seconds", "250ms", adaptiveTargets{lagDelay: 250 * time.Millisecond, perMille: 990, floor: 100}, ""},
		{"vacuum_adaptive_max_lag_seconds", "-2", adaptiveTargets{}, "seconds"},
		{"vacuum_adaptive_max_lag_seconds", "soon", adaptiveTargets{}, "seconds"},
	} {
		t.Run(tc.name+"="+tc.value, func(t *testing.T) {
			s := newTestSession(t)
			err := s.Query(context.Background(), "SET "+tc.name+" = '"+tc.value+"'", func(*Result) error { return nil })
			if tc.why != "" {
				var pe *pgerr.Error
				if !errors.As(err, &pe) || pe.Code != pgerr.InvalidParameterValue ||
					!strings.Contains(pe.Message, tc.name) || !strings.Contains(pe.Message, tc.value) || !strings.Contains(pe.Message, tc.why) {
					t.Fatalf("SET %s = %q: %v, want 22023 naming the setting, the value and %q", tc.name, tc.value, err, tc.why)
				}
				return
			}
			if err != nil {
				t.Fatalf("SET %s = %q: %v", tc.name, tc.value, err)
			}
			if got := runSQL(t, s, "SHOW "+tc.name); got != tc.name+"\n"+tc.value+"\nSHOW\n" {
				t.Fatalf("SHOW after SET: %q", got)
			}
			got, err := s.adaptiveSettingsOf()
			if err != nil || got != tc.want {
				t.Fatalf("targets %+v (%v), want %+v", got, err, tc.want)
			}
			if tc.want.on() != (tc.want.latency > 0 || tc.want.lagBytes > 0 || tc.want.lagDelay > 0) {
				t.Fatal("on() disagrees with the targets")
			}
		})
	}
}

// TestAdaptiveVacuumRefusesAnUnthrottledCeiling: the budget scales the static throttle's
// rates, so a target without any static limit is refused with 22023 before the VACUUM
// starts, and runs once a ceiling is set.
func TestAdaptiveVacuumRefusesAnUnthrottledCeiling(t *testing.T) {
	s := newTestSession(t)
	runSQL(t, s, "CREATE TABLE t (id bigint PRIMARY KEY)")
	runSQL(t, s, "SET vacuum_adaptive_latency_target = '5ms'")
	if got := runSQL(t, s, "VACUUM t"); got != "ERROR 22023\n" {
		t.Fatalf("VACUUM with a target and no ceiling: %q, want ERROR 22023", got)
	}
	runSQL(t, s, "SET vacuum_cost_delay = 1")
	if got := runSQL(t, s, "VACUUM t"); got != "VACUUM\n" {
		t.Fatalf("VACUUM with a target and a ceiling: %q", got)
	}
}

// TestScaledStretchesTheCostDelayAndCutsByteRatesByTheBudget checks that the budget
// scales every limit of the ceiling and only those it has.
func TestScaledStretchesTheCostDelayAndCutsByteRatesByTheBudget(t *testing.T) {
	ceiling := throttle.Settings{CostDelay: 2 * time.Millisecond, CostLimit: 200, PageHitCost: 1, PageMissCost: 2,
		PageDirtyCost: 20, MaxWriteBytesPerSecond: 1 << 20}
	got := scaled(ceiling, 0.25)
	want := ceiling
	want.CostDelay, want.MaxWriteBytesPerSecond = 8*time.Millisecond, 1<<18
	if got != want {
		t.Fatalf("scaled by 0.25: %+v, want %+v", got, want)
	}
	if got := scaled(ceiling, 1); got != ceiling {
		t.Fatalf("scaled by 1: %+v, want the ceiling", got)
	}
	if r := want.Rate(throttle.Cost) / ceiling.Rate(throttle.Cost); r < 0.2499 || r > 0.2501 {
		t.Fatalf("cost rate ratio %g, want 0.25", r)
	}
}
