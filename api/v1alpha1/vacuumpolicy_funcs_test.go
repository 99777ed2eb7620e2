package v1alpha1

import "testing"

func TestHistoryLimitsDefaultToThreeAndKeepAnExplicitZero(t *testing.T) {
	zero, five := int32(0), int32(5)
	tests := []struct {
		name      string
		succeeded *int32
		failed    *int32
		want      [2]int32
	}{
		{"absent", nil, nil, [2]int32{3, 3}},
		{"zero keeps none", &zero, &zero, [2]int32{0, 0}},
		{"set", &five, nil, [2]int32{5, 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var p VacuumPolicy
			p.Spec.SuccessfulRunsHistoryLimit, p.Spec.FailedRunsHistoryLimit = tt.succeeded, tt.failed
			if got := [2]int32{p.SuccessfulHistoryLimit(), p.FailedHistoryLimit()}; got != tt.want {
				t.Errorf("limits = %v, want %v", got, tt.want)
			}
		})
	}
}
