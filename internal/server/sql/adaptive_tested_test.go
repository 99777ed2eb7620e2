package sql

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/server/latency"
)

// TestAJudgementMovesTheBudgetOnlyWhenTheSlowStatementsSayWhichSide: the law sees the
// figure read when the count of statements slower than the target decides the side, the
// target itself (hold) when it does not.
func TestAJudgementMovesTheBudgetOnlyWhenTheSlowStatementsSayWhichSide(t *testing.T) {
	const target = time.Millisecond
	slow, fast := 3*time.Millisecond, 400*time.Microsecond
	q := 99.59 // the window quantile at 400 statements a second
	n := judgementStatements(q)
	for _, c := range []struct {
		name         string
		count, above int64
		v, want      time.Duration
	}{
		{"none slower among a full judgement: under", n, 0, fast, fast},
		{"one slower: a foreground at its target leaves as many half the time", n, 1, slow, target},
		{"three slower: still one time in five at the target", n, 3, slow, target},
		{"four slower: over", n, 4, slow, slow},
		{"under, but read above the target: no raise past it", n, 0, slow, target},
		{"a slow foreground, too few for a verdict below: none slower is under", 100, 0, fast, fast},
		{"a slow foreground, one slower of 100: hold", 100, 1, slow, target},
		{"a slow foreground, two slower of 100: over", 100, 2, slow, slow},
		{"a busy foreground: the figure as read", 20000, latency.AboveMax, slow, slow},
		{"a busy foreground under its target: the figure as read", 20000, 50, fast, fast},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := testedLatency(c.v, target, q, c.count, c.above); got != c.want {
				t.Fatalf("testedLatency(%v, %d of %d slower) = %v, want %v", c.v, c.above, c.count, got, c.want)
			}
		})
	}
}

// TestAForegroundAtItsTargetIsRarelyCutOrRaised: a foreground whose window quantile is
// exactly the target, judged 20,000 times on judgementStatements statements each, is cut
// and raised each at most about judgementRisk of the time; the figure as read (the order
// statistic as likely above the quantile as below) would have been over the target in
// most judgements, and the law, cutting by up to half and raising by 10 %, drifted to its
// floor on it.
func TestAForegroundAtItsTargetIsRarelyCutOrRaised(t *testing.T) {
	const target, trials = time.Millisecond, 20000
	q := 99.59
	n := judgementStatements(q)
	rng := rand.New(rand.NewPCG(1, 2))
	var cut, raised, readOver int
	for range trials {
		var above int64
		for range n {
			if rng.Float64() < (100-q)/100 {
				above++
			}
		}
		// The order statistic read (latency's unbiasedQuantile at these n): the slowest.
		v := 400 * time.Microsecond
		if above >= 1 {
			v = 3 * time.Millisecond
		}
		if v > target {
			readOver++
		}
		switch got := testedLatency(v, target, q, n, above); {
		case got > target:
			cut++
		case got < target:
			raised++
		}
	}
	share := func(k int) float64 { return float64(k) / trials }
	if share(cut) > judgementRisk || share(raised) > judgementRisk+0.02 {
		t.Fatalf("at its target: cut %.3f and raised %.3f of the judgements, want each at most about %.2f", share(cut), share(raised), judgementRisk)
	}
	if share(readOver) < 0.5 {
		t.Fatalf("the figure as read was over the target in %.3f of the judgements: the test does not show the drift it guards against", share(readOver))
	}
	t.Logf("cut %.3f, raised %.3f, held %.3f; the figure as read over the target %.3f", share(cut), share(raised), 1-share(cut)-share(raised), share(readOver))
}
