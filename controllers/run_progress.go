package controllers

import (
	"math"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
	"github.com/vacuumops/vacuum-operator/internal/runner/runnerwire"
)

// Progress: while the pod runs, the controller polls GET /progress every --progress-interval
// and folds the snapshot into the run's status; when the pod ends, the Summary in its
// termination message completes it (totals replaced, per-table results merged by name, so
// tables the summary had no room for keep what /progress said last).

// toInt rounds a runner figure to an integer, mapping NaN and infinities to 0.
func toInt(f float64) int64 {
	if math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
		return 0
	}
	if f > math.MaxInt64/2 {
		return math.MaxInt64 / 2
	}
	return int64(math.Round(f))
}

func seconds(f float64) metav1.Duration {
	return metav1.Duration{Duration: time.Duration(toInt(f*1e3)) * time.Millisecond}
}

// slept is the runner's time slept for status.totals.timeSlept; nil (unset) when the server
// does not report it (PostgreSQL).
func slept(secs *float64) *metav1.Duration {
	if secs == nil {
		return nil
	}
	d := seconds(*secs)
	return &d
}

// foldProgress writes a /progress snapshot into the run's status.
func foldProgress(s *vacuumv1alpha1.VacuumRunStatus, p *runnerwire.Progress) {
	s.Table, s.VacuumPhase = p.Table, string(p.Phase)
	s.SetPercent(int32(min(toInt(p.Percent), 100)))
	s.SetRates(toInt(p.PagesPerSecond), toInt(p.ReadBytesPerSecond), toInt(p.WriteBytesPerSecond), toInt(p.WALBytesPerSecond))
	t := vacuumv1alpha1.RunTotals{
		PagesScanned: p.PagesScanned, TuplesRemoved: p.TuplesRemoved, BytesRead: p.BytesRead,
		BytesWritten: p.BytesWritten, WALBytes: p.WALBytes, IndexPasses: p.IndexPasses, TimeSlept: slept(p.SleptSeconds),
	}
	if s.Totals != nil {
		t.PagesRemoved = s.Totals.PagesRemoved
	}
	s.Totals = &t
	tables := make([]vacuumv1alpha1.TableStatus, 0, len(p.Tables))
	for _, tp := range p.Tables {
		if len(tables) == vacuumv1alpha1.MaxStatusTables {
			break
		}
		tables = append(tables, vacuumv1alpha1.TableStatus{
			Name: tp.Name, Phase: string(tp.Phase), Percent: int32(min(toInt(tp.Percent), 100)), TuplesRemoved: tp.TuplesRemoved,
		})
	}
	s.Tables = tables
	if s.Server != nil && p.ThrottleApplies != "" {
		s.Server.ThrottleApplies = p.ThrottleApplies
	}
	foldForeground(s, p.Foreground, p.ForegroundBaseline)
	if a := p.Adaptive; a != nil {
		s.SetAdaptive(a.Binding, a.BudgetPerMille, p.ThrottleApplies, a.BoundSeconds)
	}
	foldReplication(s, p.Replication)
}

// foldForeground writes the engine server's foreground of a progress report or summary
// (with the baseline read before the vacuum) into status; nil (a volume, PostgreSQL, or a
// summary of a runner without it) leaves it as it is.
func foldForeground(s *vacuumv1alpha1.VacuumRunStatus, fg, base *runnerwire.Foreground) {
	if fg == nil {
		return
	}
	var baseN, baseP99 int64
	if base != nil {
		baseN, baseP99 = base.Statements, base.P99Microseconds
	}
	s.SetForeground(fg.Statements, toInt(fg.StatementsPerSecond), fg.P50Microseconds, fg.P99Microseconds, baseN, baseP99)
}

// foldReplication writes the standbys' lag of a progress report or summary into status;
// nil (no standby seen, or a volume) leaves it as it is.
func foldReplication(s *vacuumv1alpha1.VacuumRunStatus, rp *runnerwire.Replication) {
	if rp != nil {
		s.SetReplication(int32(min(rp.Standbys, math.MaxInt32)), rp.LagBytes, rp.LagSeconds, rp.MaxLagBytes, rp.MaxLagSeconds)
	}
}

// foldSummary writes the runner's final Summary into the run's status.
func foldSummary(s *vacuumv1alpha1.VacuumRunStatus, sum *runnerwire.Summary) {
	t := sum.Totals
	s.Totals = &vacuumv1alpha1.RunTotals{
		PagesScanned: t.PagesScanned, PagesRemoved: t.PagesRemoved, TuplesRemoved: t.TuplesRemoved,
		BytesRead: t.BytesRead, BytesWritten: t.BytesWritten, WALBytes: t.WALBytes, IndexPasses: t.IndexPasses,
		TimeSlept: slept(t.SleptSeconds),
	}
	s.SetRates(toInt(t.PagesPerSecond), toInt(t.ReadRate.Achieved), toInt(t.WriteRate.Achieved), toInt(t.WALRate.Achieved))
	index := map[string]int{}
	for i, ts := range s.Tables {
		index[ts.Name] = i
	}
	for _, tr := range sum.Tables {
		ts := vacuumv1alpha1.TableStatus{
			Name: tr.Table, Phase: string(runnerwire.PhaseDone), Percent: 100, Skipped: tr.Skipped,
			TuplesRemoved: tr.TuplesRemoved, PagesScanned: tr.PagesScanned, PagesRemoved: tr.PagesRemoved,
		}
		if i, ok := index[tr.Table]; ok {
			s.Tables[i] = ts
		} else if len(s.Tables) < vacuumv1alpha1.MaxStatusTables {
			index[tr.Table] = len(s.Tables)
			s.Tables = append(s.Tables, ts)
		}
	}
	s.TablesOmitted = int32(min(sum.TablesOmitted, math.MaxInt32))
	foldReplication(s, sum.Replication)
	foldForeground(s, sum.Foreground, sum.ForegroundBaseline)
	if sum.Phase == runnerwire.SummarySucceeded {
		s.SetPercent(100)
		s.VacuumPhase = string(runnerwire.PhaseDone)
	}
}
