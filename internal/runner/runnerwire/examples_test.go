package runnerwire

import (
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// The examples behind the golden files. The runner's tests regenerate the output files
// (progress, summary, report) from the real binary; these keep the shapes reviewable until then.

func qty(s string) *resource.Quantity { q := resource.MustParse(s); return &q }

func exampleRunSpec() RunSpec {
	return RunSpec{
		DataDir: "/data",
		Mode:    ModeLazy,
		Tables:  []string{"orders", "events"},
		Throttle: &Throttle{
			CostDelay:              &metav1.Duration{Duration: 2 * time.Millisecond},
			CostLimit:              ptr.To[int32](200),
			PageHitCost:            ptr.To[int32](1),
			PageMissCost:           ptr.To[int32](2),
			PageDirtyCost:          ptr.To[int32](20),
			MaxReadBytesPerSecond:  qty("50Mi"),
			MaxWriteBytesPerSecond: qty("20Mi"),
			MaxWALBytesPerSecond:   qty("10Mi"),
		},
		RingSize:            qty("2Mi"),
		BufferPoolSize:      qty("128Mi"),
		Parallelism:         ptr.To[int32](2),
		IndexWorkers:        ptr.To[int32](0),
		MaintenanceWorkMem:  qty("64Mi"),
		Truncate:            ptr.To(true),
		MinDeadTuplePercent: ptr.To[int32](0),
		StopAt:              &metav1.Time{Time: time.Date(2026, 12, 2, 5, 0, 0, 0, time.UTC)},
		Resume:              true,
		TableOverrides: []TableOverride{{
			Table:    "events",
			Throttle: Throttle{CostDelay: &metav1.Duration{Duration: 10 * time.Millisecond}},
		}},
	}
}

// exampleServerRunSpec is an online run as the operator writes it: the server target, the
// fields the user wrote, and no data directory, ring or buffer pool.
func exampleServerRunSpec() RunSpec {
	return RunSpec{
		Server: &ServerTarget{
			Address: "10.244.0.17:5432", Database: "shop", User: "vacuum",
			PasswordFile: "/var/run/vacuum-runner/credentials/password", SSLMode: "verify-full",
			SSLRootCertFile: "/var/run/vacuum-runner/ca/ca.crt",
		},
		Mode:   ModeLazy,
		Tables: []string{"public.orders"},
		Throttle: &Throttle{
			CostDelay: &metav1.Duration{Duration: 2 * time.Millisecond},
			CostLimit: ptr.To[int32](200),
		},
		Parallelism:         ptr.To[int32](2),
		MinDeadTuplePercent: ptr.To[int32](10),
	}
}

func exampleThrottle() Throttle {
	return Throttle{
		CostDelay:             &metav1.Duration{Duration: 5 * time.Millisecond},
		CostLimit:             ptr.To[int32](400),
		MaxReadBytesPerSecond: qty("100Mi"),
		Adaptive: &Adaptive{
			ForegroundLatency: &ForegroundLatency{PercentilePerMille: ptr.To[int32](990), Target: metav1.Duration{Duration: 5 * time.Millisecond}},
			ReplicationLag:    &ReplicationLag{MaxBytes: qty("64Mi")},
			FloorPerMille:     ptr.To[int32](100),
		},
	}
}

func exampleProgress() Progress {
	return Progress{
		Phase: PhaseVacuumingIndexes, Table: "events", TablesDone: 1, TablesTotal: 2,
		PagesTotal: 12000, PagesScanned: 9000, PagesVacuumed: 4500, IndexPasses: 1,
		DeadTuples: 150000, DeadTupleBytes: 900000, TuplesRemoved: 250000,
		BytesRead: 98304000, BytesWritten: 41943040, WALBytes: 20971520, WALFlushes: 310,
		BufferHits: 1200, BufferMisses: 12000, BuffersDirtied: 5120,
		SleptSeconds: ptr.To(3.25), ElapsedSeconds: 12.5, PagesPerSecond: 1610,
		ReadBytesPerSecond: 13189120, WriteBytesPerSecond: 5242880, WALBytesPerSecond: 2097152,
		Percent: 62.5, ThrottleApplies: ThrottleAppliesImmediately,
		Tables: []TableProgress{
			{Name: "orders", Phase: PhaseDone, Percent: 100, TuplesRemoved: 100000},
			{Name: "events", Phase: PhaseVacuumingIndexes, Percent: 37.5, TuplesRemoved: 150000},
		},
		Foreground:         &Foreground{WindowSeconds: 10, Statements: 4210, StatementsPerSecond: 421, P50Microseconds: 312, P99Microseconds: 2650},
		ForegroundBaseline: &Foreground{WindowSeconds: 10, Statements: 4380, StatementsPerSecond: 438, P50Microseconds: 298, P99Microseconds: 2040},
		Replication:        &Replication{Standbys: 1, LagBytes: 65536, LagSeconds: 0.25, MaxLagBytes: 1048576, MaxLagSeconds: 1.5},
	}
}

func exampleTable(name string) TableResult {
	return TableResult{
		Table: name, Mode: ModeLazy, PagesTotal: 8000, PagesScanned: 8000, PagesRemoved: 1200,
		PagesRemaining: 6800, TuplesRemoved: 100000, TuplesRemaining: 400000, IndexPasses: 1,
		ElapsedSeconds: 6.5, PagesPerSecond: 1230.75, BytesRead: 65536000, BytesWritten: 26214400,
		WALBytes: 13107200, WALFlushes: 160, WALRecords: 8100, WALFullPageImages: 1500,
		RingDirtyEvictions: 155, BufferHits: 800, BufferMisses: 8000, BuffersDirtied: 3200,
		SleptSeconds: ptr.To(1.75),
		Indexes:      []IndexResult{{Name: name + "_pkey", Pages: 1400, EntriesRemoved: 100000}},
		CostRate:     Rate{Configured: 100000, Achieved: 81250.5},
		ReadRate:     Rate{Configured: 52428800, Achieved: 10082461.5},
		WriteRate:    Rate{Configured: 20971520, Achieved: 4032984.6},
		WALRate:      Rate{Configured: 10485760, Achieved: 2016492.3},
		Notices:      []string{},
		Complete:     true,
		BlockReached: 8000,
	}
}

func exampleTotals(tables ...TableResult) Totals {
	var t Totals
	for _, r := range tables {
		t.TablesVacuumed++
		t.PagesTotal += r.PagesTotal
		t.PagesScanned += r.PagesScanned
		t.PagesRemoved += r.PagesRemoved
		t.PagesRemaining += r.PagesRemaining
		t.TuplesRemoved += r.TuplesRemoved
		t.TuplesRemaining += r.TuplesRemaining
		t.IndexPasses += r.IndexPasses
		t.ElapsedSeconds += r.ElapsedSeconds
		t.BytesRead += r.BytesRead
		t.BytesWritten += r.BytesWritten
		t.WALBytes += r.WALBytes
		t.WALFlushes += r.WALFlushes
		t.WALRecords += r.WALRecords
		t.WALFullPageImages += r.WALFullPageImages
		t.RingDirtyEvictions += r.RingDirtyEvictions
		t.BufferHits += r.BufferHits
		t.BufferMisses += r.BufferMisses
		t.BuffersDirtied += r.BuffersDirtied
		t.SleptSeconds = ptr.To(ptr.Deref(t.SleptSeconds, 0) + ptr.Deref(r.SleptSeconds, 0))
	}
	t.PagesPerSecond = 1230.75
	t.CostRate = Rate{Configured: 100000, Achieved: 81250.5}
	t.ReadRate = Rate{Configured: 52428800, Achieved: 10082461.5}
	t.WriteRate = Rate{Configured: 20971520, Achieved: 4032984.6}
	t.WALRate = Rate{Configured: 10485760, Achieved: 2016492.3}
	return t
}

func exampleReport() Report {
	tables := []TableResult{exampleTable("orders"), exampleTable("events")}
	return Report{Tables: tables, Totals: exampleTotals(tables...)}
}

func exampleSummary(phase string, exitCode int, message string) Summary {
	r := exampleReport()
	return Summary{Phase: phase, ExitCode: exitCode, Message: message, Totals: r.Totals, Tables: r.Tables}
}
