package v1alpha1

import (
	"reflect"
	"testing"

	"k8s.io/utils/ptr"
)

func TestFormatPerMilleRoundsToTenths(t *testing.T) {
	for in, want := range map[int64]string{-3: "0.0x", 0: "0.0x", 1000: "1.0x", 1300: "1.3x", 1349: "1.3x",
		1350: "1.4x", 999: "1.0x", 12345: "12.3x"} {
		if got := FormatPerMille(in); got != want {
			t.Errorf("FormatPerMille(%d) = %q, want %q", in, got, want)
		}
	}
}

func TestSetForegroundComparesP99WithTheBaseline(t *testing.T) {
	cases := []struct {
		name                                   string
		n, perSecond, p50, p99, baseN, baseP99 int64
		want                                   ForegroundStatus
	}{
		{"slower than before", 4210, 421, 312, 2650, 4380, 2040, ForegroundStatus{P50: "312µs", P99: "2.65ms",
			StatementsPerSecond: 421, BaselineP99: "2.04ms", P99VsBaselinePerMille: ptr.To(int64(1299)), P99VsBaseline: "1.3x"}},
		{"no baseline traffic", 10, 1, 50, 90, 0, 0, ForegroundStatus{P50: "50µs", P99: "90µs", StatementsPerSecond: 1}},
		{"no traffic now", 0, 0, 0, 0, 300, 700, ForegroundStatus{BaselineP99: "700µs"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var s VacuumRunStatus
			s.SetForeground(c.n, c.perSecond, c.p50, c.p99, c.baseN, c.baseP99)
			if got := *s.Foreground; !reflect.DeepEqual(got, c.want) {
				t.Errorf("foreground %+v (per mille %v), want %+v", got, got.P99VsBaselinePerMille, c.want)
			}
		})
	}
}
