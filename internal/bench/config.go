package bench

import (
	"math"
	"time"
)

// Config is one benchmark run: where to write, how big, which engine
// settings.
type Config struct {
	// OutDir receives REPORT.md, the CSV files and the PNG plots.
	OutDir string
	// WorkDir holds the data directories (removed afterwards). "" = a new
	// temporary directory under os.TempDir().
	WorkDir string
	// Quick runs every experiment at toy size (under 2 minutes).
	Quick bool
	// Only runs just these experiments (nil = all).
	Only []int
	// Direct asks for O_DIRECT relation I/O (the engine falls back to
	// buffered I/O where the file system refuses it; the report says so).
	Direct bool
	// Command is the command line recorded in the report, and Via what ran
	// it ("make bench"), if anything.
	Command, Via string
	// Logf receives progress messages; nil = discard.
	Logf func(format string, args ...any)
}

// Sizes are every size and setting of the experiments. DefaultSizes and
// QuickSizes are the two presets; the report prints the one used.
type Sizes struct {
	Name string

	// Experiment 1 (foreground impact).
	FgRows       int
	FgPayload    int
	FgDeadPct    float64
	FgPoolBytes  int64
	FgWorkers    int
	FgThink      time.Duration // pause between one worker's lookups
	FgWarmup     time.Duration // lookups before measuring starts
	BaselineTime time.Duration
	Delays       []time.Duration // cost delays at limit CostLimit; 0 = unthrottled
	CostLimit    int

	// Experiment 2 (parallel tables).
	ParTables     int
	ParRows       int
	ParPayload    int
	ParPoolBytes  int64
	Parallelisms  []int
	ParCostDelay  time.Duration // the shared budget: CostLimit per ParCostDelay
	ParDeadPct    float64
	ParRingBytes  int64
	ParIndexWorks int

	// Experiment 3 (ring size).
	RingRows      int
	RingPayload   int
	RingPoolBytes int64
	RingHotPct    float64 // share of keys the foreground looks up
	RingWarmup    time.Duration
	Rings         []int64

	// Experiment 4 (dead-TID memory).
	SynthSizes     []int
	SynthDensities []float64 // percentage of a page's tuples that are dead
	SynthTuples    int       // tuples per heap page in the synthetic sets
	SynthProbes    int
	DeadRows       int
	DeadPct        float64
	DeadPoolBytes  int64
	DeadLoaders    int
	Mems           []int64

	// WAL segment size of the engine's data directories (0 = 16 MiB).
	WALSegmentSize int64

	// Experiment 5 (VACUUM FULL and a synchronous standby's lag; the servers have
	// experiment 7's buffer pool, SrvPoolBytes).
	FullRows        int           // rows of the table FULL rewrites
	FullPayload     int           // bytes of each row's padding
	FullCostDelay   time.Duration // the cost-delay run's vacuum_cost_delay, at CostLimit
	FullLoadScale   int           // pgbench -i -s of the load's tables
	FullLoadRate    int           // pgbench -R (transactions per second)
	FullLoadClients int           // pgbench -c
	FullLoadChunk   time.Duration // pgbench -T of each chunk of the load
	FullBaseline    time.Duration // load before FULL starts
	LagSample       time.Duration // pg_stat_replication read every LagSample
	DrainFactor     float64       // keep sampling after FULL for this many times its duration at most

	// Experiment 6 (throttle accuracy).
	AccRows      int
	AccPayload   int
	AccDelays    []time.Duration
	AccByteShare []float64 // byte limits as shares of the unthrottled rate

	// Experiment 7 (the engine server against PostgreSQL 15 under pgbench).
	SrvScale        int             // pgbench -i -s
	SrvClients      int             // pgbench -c
	SrvThreads      int             // pgbench -j
	SrvDuration     time.Duration   // pgbench -T of each measured run
	SrvRounds       int             // rounds of the two workloads on both systems
	SrvPoolBytes    int64           // --buffer-pool and shared_buffers
	SrvVacuumDelay  time.Duration   // the throttled VACUUM's vacuum_cost_delay
	SrvVacuumAlone  time.Duration   // the foreground alone before each VACUUM
	SrvVacuumWindow time.Duration   // the foreground run a VACUUM starts SrvVacuumAlone into
	OnlineDelays    []time.Duration // experiment 8's cost delays, the first 0 (experiment 1's)

	// Experiment 8 (online VACUUM of the engine server and of PostgreSQL 15 under pgbench).
	OnlineScale  int           // pgbench -i -s of both servers
	OnlineWarmup time.Duration // the load's first stretch (prepares, cold caches), measured in neither figure
	OnlineAlone  time.Duration // the steady stretch of foreground alone before each VACUUM
	OnlineTail   time.Duration // the load after each VACUUM (also counted as alone)
	OnlineGuess  time.Duration // the unthrottled VACUUM's expected time (the first load's length)
	// The repeated rounds after the first pass: at each throttled delay whose first run on the
	// engine server took at most OnlineCandidateX times its unthrottled time, OnlineRounds more
	// runs on each server, so the verdict rests on medians.
	// OnlineMaxCandidates bounds those delays to the smallest so many, and so the rounds' time.
	OnlineRounds        int
	OnlineCandidateX    float64
	OnlineMaxCandidates int

	// Experiment 9: a lazy vacuum split over maintenance windows.
	WinRows, WinPayload int
	WinPoolBytes        int64
	WinCostDelay        time.Duration
	WinCostLimit        int
	WinSplits           []int // windows the table is split over (1 = one uninterrupted vacuum)
	WinCycles           []int // dead-items cycles a window's cycles are sized for

	// Experiment 10: adaptive throttling against the best fixed cost delay (the foreground p99
	// target's servers have AdaptPoolBytes; the lag target's pair has experiment 7's buffer
	// pool, and its load and sampling are experiment 5's).
	AdaptDelays    []time.Duration // the fixed grid, increasing, above 0 (experiment 1's delays)
	AdaptRuns      int             // interleaved runs of each setting (and of the start's unthrottled VACUUM)
	AdaptBisect    int             // bisection steps inside the grid's bracket
	AdaptScale     int             // pgbench -i -s of the foreground target's servers
	AdaptPoolBytes int64           // the foreground target's servers' --buffer-pool and shared_buffers
	AdaptRate      int             // pgbench -R of the select-only load
	AdaptClients   int             // pgbench -c
	AdaptThreads   int             // pgbench -j
	AdaptDeadEvery int             // the bloating UPDATE touches every AdaptDeadEvery-th account
	AdaptChunk     time.Duration   // pgbench -T of each chunk of a load
	AdaptWarmup    time.Duration   // the foreground load's first stretch, before its first VACUUM or stretch alone
	AdaptAlone     time.Duration   // the load alone at the start
	AdaptSettle    time.Duration   // between a bloating UPDATE and its VACUUM
	AdaptFullRows  int             // rows of the table the lag target's FULL rewrites (FullPayload bytes each)
	// AdaptCeiling is the foreground p99 target's adaptive ceiling, a cost delay below the
	// grid's fastest, so that the law, not the ceiling, sets the rate.
	AdaptCeiling time.Duration
	// AdaptCap stops a fixed-delay VACUUM (or FULL) of either target at this multiple of
	// the longest adaptive run of its target before it, or at AdaptCapMin if that is longer,
	// but never later than AdaptCapMax (0: no such bound): that run is "slower than the cap".
	AdaptCap    float64
	AdaptCapMin time.Duration
	AdaptCapMax time.Duration

	// Experiment 11: the vacuum against PostgreSQL 15 and against the machine's limit.
	LimRows int64 // bulkdata's table, both hint-bit states
	LimRuns int   // interleaved rounds (each: every state and I/O mode, then PostgreSQL)

	// Experiment 12: the operator at fleet scale.
	FleetScales   []int         // VacuumPolicies of each fleet, in increasing order
	FleetRealPods int           // at most this many policies of a fleet get real runner pods
	FleetPeriod   time.Duration // each policy's "@every" schedule; creations spread over one
	FleetWindow   time.Duration // measured after the last policy is created
	// FleetSettle is the wait after a fresh manager's controllers have started, before its
	// idle baseline: their caches, of a cluster without policies, sync in milliseconds.
	FleetSettle time.Duration
	// FleetRatePeriods measure the largest fleet again, before its FleetPeriod row, at each of
	// these longer periods: fewer ticks a second, to show the offered load the machine carries.
	FleetRatePeriods []time.Duration
}

// DefaultSizes are the sizes of `make bench`: about 20 minutes on the
// project's 2-core machine while other work loads it.
func DefaultSizes() Sizes {
	ms := time.Millisecond
	return Sizes{
		Name:   "default",
		FgRows: 200_000, FgPayload: 100, FgDeadPct: 20, FgPoolBytes: 8 << 20,
		FgWorkers: 4, FgThink: ms, FgWarmup: 2 * time.Second, BaselineTime: 10 * time.Second,
		Delays:    []time.Duration{0, 1 * ms, 2 * ms, 5 * ms, 10 * ms, 20 * ms},
		CostLimit: 200,

		ParTables: 8, ParRows: 20_000, ParPayload: 100, ParPoolBytes: 16 << 20,
		Parallelisms: []int{1, 2, 4, 8}, ParCostDelay: 20 * ms, ParDeadPct: 20, ParRingBytes: 2 << 20,
		ParIndexWorks: 1,

		RingRows: 300_000, RingPayload: 400, RingPoolBytes: 128 << 20, RingHotPct: 40,
		RingWarmup: 8 * time.Second,
		Rings:      []int64{0, 256 << 10, 2 << 20, 16 << 20},

		SynthSizes:     []int{10_000, 100_000, 1_000_000, 10_000_000},
		SynthDensities: []float64{5, 20, 60, 100},
		SynthTuples:    60, SynthProbes: 1_000_000,
		DeadRows: 2_200_000, DeadPct: 91, DeadPoolBytes: 32 << 20, DeadLoaders: 4,
		Mems: []int64{256 << 10, 1 << 20, 4 << 20, 16 << 20},

		FullRows: 150_000, FullPayload: 200, FullCostDelay: 2 * ms, FullLoadScale: 1, FullLoadRate: 50,
		FullLoadClients: 2, FullLoadChunk: 5 * time.Second, FullBaseline: 3 * time.Second,
		LagSample: 100 * ms, DrainFactor: 3,

		AccRows: 60_000, AccPayload: 100,
		AccDelays:    []time.Duration{1 * ms, 2 * ms, 5 * ms, 10 * ms, 20 * ms},
		AccByteShare: []float64{0.25, 0.5},

		SrvScale: 5, SrvClients: 8, SrvThreads: 2, SrvDuration: 5 * time.Second, SrvRounds: 3,
		SrvPoolBytes: 128 << 20, SrvVacuumDelay: 10 * ms, SrvVacuumAlone: time.Second, SrvVacuumWindow: 18 * time.Second,
		// Experiment 1's delays. 250, 500 and 750 us are gone: our VACUUM never sleeps below a
		// millisecond (its work is slower than the rate they set; docs/benchmarks/online-cost.md),
		// so they took 1.0-1.5x its unthrottled time and kept the p99 no better than 1 ms did,
		// and their six runs paid for the repeated rounds at the candidate delays.
		OnlineDelays: []time.Duration{0, 1 * ms, 2 * ms, 5 * ms, 10 * ms, 20 * ms},
		// Two more rounds at each delay whose first run took at most 4x the unthrottled time:
		// the only delays that can meet the goal's 3x on a median, whose p99 ratio one run
		// leaves to chance (2 ms's was 1.11x and 1.38x in two make bench runs). At most two
		// of them (1 and 2 ms on a quiet machine): at load 10, where the unthrottled VACUUM
		// took 3 s, 5 and 10 ms came within 4x too, and their rounds would have added some
		// seven minutes.
		OnlineRounds: 2, OnlineCandidateX: 4, OnlineMaxCandidates: 2,
		// Scale 6: the unthrottled VACUUM lasts about a second or more (scale 2's 0.17 s made
		// every multiple of it noisy), while the reload before each VACUUM stays affordable.
		OnlineScale: 6, OnlineWarmup: time.Second, OnlineAlone: 3 * time.Second, OnlineTail: 2 * time.Second, OnlineGuess: 4 * time.Second,

		WinRows: 200_000, WinPayload: 100, WinPoolBytes: 16 << 20, WinCostDelay: 10 * ms, WinCostLimit: 100,
		WinSplits: []int{1, 2, 4, 8}, WinCycles: []int{4, 2},

		// The foreground p99 target: scale 40 in a 1 GiB pool on both servers. At scale 16 in
		// experiment 7's 128 MiB pool pgbench_accounts did not fit, the load read through
		// O_DIRECT, and its p99 alone (6.47 ms) and beside the unthrottled VACUUM (6.81 ms) were
		// the disk's, 3 % apart: no target between them meant anything. In a pool that holds the
		// table the load's latency is the CPU's and the VACUUM's (the probe of 2026-12-07: the
		// unthrottled VACUUM 1.4-2.4 s, p99 5.8 ms beside it), and at scale 40 the VACUUM at the
		// adaptive ceiling (500 us) lasts 4.5-5.0 s, 5 windows a run and some 8 of the law's
		// judgements, against about 1 s at scale 16 and 250 us, where 8 of 9 adaptive runs ended
		// before the law had judged twice. pgbench -i -s 40 takes 17 s on the engine server, 6 s
		// on PostgreSQL. -R 400 (from 200): a judgement of the p99 needs 169 statements (the
		// server's judgementStatements), 0.42 s at 400 a second against 0.85 s at 200.
		// The ceiling, 500 us: half the grid's fastest delay, so the law, not the ceiling, has to
		// find the rate when 1 ms holds; no longer about unthrottled (250 us made the VACUUM last
		// about what the unthrottled one does, with nothing left for the law to do before it
		// ended). At 1 ms the VACUUM takes 9.1-9.8 s, PostgreSQL's 4.9 s to over 10 s: AdaptCapMin
		// stops those beyond 10 s (a time then a lower bound) and the slower delays (2 ms
		// takes about 19 s).
		// Measured on this code (latency half alone, 2026-12-07, a machine at load 4-12 with
		// 50 % steal at times): the half took 9m10s and 8m16s (the engine server's pgbench -i
		// 15-37 s; the capped runs most of the rest), over the 6 minutes it was meant for.
		// Adaptive runs 4.6-7.0 s, 5-7 windows each. But the load alone read a p99 of 7.5-47 ms
		// (CPU pressure stall 700-900 ms/s from other work) and beside the unthrottled VACUUM
		// 18-149 ms, so the targets were 48.06 and 41.16 ms, ten times what the VACUUM itself
		// does to the load in a quieter stretch (p99 2-3 ms at 0.7-1.5 ms), and the law bound
		// its runs for only 29 % and 35 % of their time: those runs say nothing of the law yet.
		AdaptDelays: []time.Duration{1 * ms, 2 * ms, 5 * ms, 10 * ms, 20 * ms}, AdaptRuns: 3, AdaptBisect: 2,
		AdaptScale: 40, AdaptPoolBytes: 1 << 30, AdaptRate: 400, AdaptClients: 2, AdaptThreads: 2, AdaptDeadEvery: 10,
		AdaptChunk: 2 * time.Second, AdaptWarmup: time.Second, AdaptAlone: 3 * time.Second, AdaptSettle: time.Second,
		// 200,000 rows: at 50,000 the adaptive FULL lasted 1.2-1.8 s, one or two 1-second
		// windows a run, which say nothing of a 95 % share (the make bench of 2026-12-06: 3
		// windows in all); at 20 ms the fixed FULL took 9.3 s. Four times the rows give the
		// adaptive runs several windows each, and AdaptCap stops the slow fixed delays (37 s at
		// 20 ms), so the half keeps to its 10 minutes.
		AdaptFullRows: 200_000,
		// AdaptCapMin: an adaptive run at about the ceiling's speed must not cap the fixed
		// delays below what tells them apart (for the lag target's FULLs, and for the foreground
		// p99 target's 1 ms, about 9.4 s at scale 40).
		// AdaptCapMax: the make bench of 2026-12-07 had one adaptive run of 36 s in the
		// foreground p99 target's half, which let its slow fixed delays run up to 54 s each
		// and the half more than 15 minutes; at 20 s the slow fixed runs cost at most
		// 20 s each, and a fixed run stopped there is compared as a lower bound.
		AdaptCeiling: 500 * time.Microsecond, AdaptCap: 1.5, AdaptCapMin: 10 * time.Second, AdaptCapMax: 20 * time.Second,

		LimRows: 200_000, LimRuns: 3,
		FleetScales: []int{10, 100, 1000}, FleetRealPods: 100, FleetPeriod: 20 * time.Second, FleetWindow: 30 * time.Second,
		FleetSettle:      3 * time.Second,
		FleetRatePeriods: []time.Duration{100 * time.Second},
	}
}

// QuickSizes run every experiment at toy size, for the test and for a look at the
// machinery, within the 2 minutes the project budgets for them: 1m57s at load 5.5-8.6 on the
// project's 2-core machine (2026-12-07), where the sizes before that day's cuts took 3m29s.
func QuickSizes() Sizes {
	ms := time.Millisecond
	return Sizes{
		Name:   "quick",
		FgRows: 12_000, FgPayload: 100, FgDeadPct: 20, FgPoolBytes: 512 << 10,
		FgWorkers: 4, FgThink: ms, FgWarmup: 100 * ms, BaselineTime: 300 * ms,
		Delays:    []time.Duration{0, 1 * ms, 2 * ms, 5 * ms, 10 * ms, 20 * ms},
		CostLimit: 200,

		ParTables: 8, ParRows: 1_500, ParPayload: 100, ParPoolBytes: 1 << 20,
		Parallelisms: []int{1, 2, 4, 8}, ParCostDelay: 2 * ms, ParDeadPct: 20, ParRingBytes: 128 << 10,
		ParIndexWorks: 1,

		RingRows: 6_000, RingPayload: 400, RingPoolBytes: 2 << 20, RingHotPct: 40,
		RingWarmup: 300 * ms,
		Rings:      []int64{0, 128 << 10, 256 << 10, 512 << 10},

		SynthSizes:     []int{1_000, 10_000, 100_000},
		SynthDensities: []float64{5, 20, 60, 100},
		SynthTuples:    60, SynthProbes: 20_000,
		DeadRows: 8_000, DeadPct: 80, DeadPoolBytes: 1 << 20, DeadLoaders: 2,
		Mems: []int64{64 << 10, 256 << 10, 1 << 20},

		// No cost-delay FULL (FullCostDelay 0) and a smaller table, for time. -R 200: the four
		// FULLs last about 0.2 s in all, and at -R 20 (about 4 commits expected in them) the
		// quick run's test found none once in a make test (2026-12-07), a 2 % chance.
		FullRows: 4_000, FullPayload: 200, FullCostDelay: 0, FullLoadScale: 1, FullLoadRate: 200,
		FullLoadClients: 2, FullLoadChunk: time.Second, FullBaseline: 1500 * ms,
		LagSample: 100 * ms, DrainFactor: 3,
		WALSegmentSize: 1 << 20,

		AccRows: 3_000, AccPayload: 100,
		AccDelays:    []time.Duration{1 * ms, 5 * ms, 20 * ms},
		AccByteShare: []float64{0.5},

		// One-second pgbench runs (thousands of transactions each), and VACUUM windows of 1 s:
		// the VACUUM at 5 ms takes about 0.2 s, so it ends well inside the window's half second
		// after the 0.5 s alone.
		SrvScale: 1, SrvClients: 4, SrvThreads: 2, SrvDuration: time.Second, SrvRounds: 1,
		SrvPoolBytes: 32 << 20, SrvVacuumDelay: 5 * ms, SrvVacuumAlone: 500 * ms, SrvVacuumWindow: time.Second,
		// Short stretches and a throttled delay of 5 ms: each of the ten runs' loads lasts 2 s
		// (pgbench -T counts whole seconds; the load is the stretches, 1.4 s, and 1.5 times the
		// VACUUM's expected time, 0.1-0.2 s unthrottled and 0.3-0.4 s at 5 ms for 7,000 cost
		// units), not 4-5 s, and its stretches still hold thousands of transactions.
		OnlineDelays: []time.Duration{0, 5 * ms},
		OnlineScale:  1, OnlineWarmup: 400 * ms, OnlineAlone: 500 * ms, OnlineTail: 500 * ms, OnlineGuess: 300 * ms,
		// One repeated round at any delay, so the quick run goes through the repeated path.
		OnlineRounds: 1, OnlineCandidateX: math.MaxFloat64, OnlineMaxCandidates: 1,

		WinRows: 8_000, WinPayload: 100, WinPoolBytes: 1 << 20, WinCostDelay: 10 * ms, WinCostLimit: 200,
		WinSplits: []int{1, 2, 4, 8}, WinCycles: []int{4, 2},

		AdaptDelays: []time.Duration{1 * ms, 20 * ms}, AdaptRuns: 1, AdaptBisect: 0,
		AdaptScale: 1, AdaptPoolBytes: 32 << 20, AdaptRate: 200, AdaptClients: 2, AdaptThreads: 1, AdaptDeadEvery: 10,
		// Half-second stretches before the VACUUMs: the latency half starts four loads, each with a
		// warm-up, and its stretch alone holds about a hundred transactions at -R 200.
		AdaptChunk: time.Second, AdaptWarmup: 500 * ms, AdaptAlone: 500 * ms, AdaptSettle: 100 * ms, AdaptFullRows: 4_000,
		AdaptCeiling: 250 * time.Microsecond, AdaptCap: 1.5,

		LimRows: 5_000, LimRuns: 1,
		// A 2 s period and window: each of the 10 policies ticks once in the window, and the
		// pods that never start fail after 1 s (half the period, in whole seconds).
		FleetScales: []int{10}, FleetRealPods: 5, FleetPeriod: 2 * time.Second, FleetWindow: 2 * time.Second,
		FleetSettle: 500 * ms,
	}
}
