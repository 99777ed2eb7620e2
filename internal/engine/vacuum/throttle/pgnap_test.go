package throttle

import (
	"context"
	"testing"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine/usage"
)

func TestPostgresNapFollowsPostgresDelayRule(t *testing.T) {
	p, err := NewPostgresNap(DefaultSettings(), nil) // 2 ms per 200
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	steps := []struct {
		hits    int64
		naps    int64
		lastNap time.Duration
	}{
		{150, 0, 0},                       // balance 150 < 200: no nap
		{100, 1, 2500 * time.Microsecond}, // balance 250: 2 ms * 250/200
		{199, 1, 2500 * time.Microsecond}, // balance was reset to 0
		{1, 2, 2 * time.Millisecond},      // exactly the limit
		{5000, 3, 8 * time.Millisecond},   // capped at 4 * delay
	}
	for i, st := range steps {
		p.Charge(usage.Reading{Hits: st.hits})
		if err := p.Wait(ctx); err != nil {
			t.Fatal(err)
		}
		got := p.Stats()
		if got.Naps != st.naps || got.LastNap != st.lastNap {
			t.Fatalf("step %d: naps %d last %v, want %d and %v", i, got.Naps, got.LastNap, st.naps, st.lastNap)
		}
		if got.Slept < got.Requested {
			t.Fatalf("step %d: slept %v less than requested %v", i, got.Slept, got.Requested)
		}
	}
}
