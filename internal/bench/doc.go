// Package bench measures the five field reports of docs/design.md with the
// bundled engine, in one run, and publishes them: one CSV file per table of
// figures, PNG plots (gonum/plot) and REPORT.md, all written by the run
// itself (cmd/vacbench, `make bench`).
//
// # Experiments
//
//  0. Machine probe: one reader's direct-read rate (8 and 128 KiB), the
//     median 8 KiB O_DSYNC write, time.Sleep's floor.
//  1. Foreground impact: four goroutines of random index point lookups,
//     p50/p99 alone and during lazy vacuum at cost delays 0-20 ms.
//  2. Parallel tables: eight equal tables at parallelism 1, 2, 4, 8, under
//     one shared budget and unthrottled.
//  3. Ring size: vacuum time, WAL flushes and the foreground's buffer hit
//     ratio for rings of 0 to 16 MiB.
//  4. Dead-TID memory: tidstore against a sorted 6-byte array (bytes per
//     TID, lookup ns) on synthetic sets, then index passes of a real table
//     with about 2 million dead TIDs at several memory budgets.
//  5. VACUUM FULL and replication lag: an engine-server primary and its
//     synchronous standby (two processes of this binary, ServeIfChild) under
//     a fixed-rate pgbench tpcb-like load, VACUUM FULL of another table
//     unthrottled, with a cost delay and with the WAL-rate limit at half the
//     standby's measured apply rate; PostgreSQL 15 with a synchronous
//     pg_basebackup standby beside it, its FULL unthrottled; lag from
//     pg_stat_replication every 100 ms, commit p99 from pgbench -l.
//  6. Throttle accuracy: achieved against configured rate for cost limits
//     (rate pacing and PostgreSQL's nap rule) and byte limits.
//  7. The engine server against PostgreSQL 15: pgbench select-only and
//     tpcb-like (-M prepared) TPS and p99 on both, interleaved, as ratios,
//     and the foreground p99 during an unthrottled and a 10 ms-throttled
//     VACUUM of pgbench_accounts after a bloating UPDATE.
//  10. Adaptive throttling against the best fixed cost delay: for a foreground
//     p99 target (select-only at a fixed rate beside an online lazy VACUUM, the
//     engine server and PostgreSQL 15) and a replication-lag target (tpcb-like
//     at a fixed rate beside an online VACUUM FULL, experiment 5's pairs), the
//     targets chosen from the load alone and beside the unthrottled VACUUM, the
//     VACUUM's time with the vacuum_adaptive_* settings against the fastest
//     fixed delay that holds the target (experiment 1's delays, then bisection,
//     interleaved rounds), and the share of 1-second windows that held it; the
//     foreground target's adaptive ceiling lies below the grid, so the law sets
//     the rate, and its slow fixed runs stop at a cap (slower than the cap).
//
// # Invariants
//
//   - Every measured run starts from a fresh copy of a data directory built
//     once per experiment (BuildDataSet, engine.CopyDataDir) and opened with a cold
//     buffer pool, with O_DIRECT when Config.Direct (the report says when
//     the engine fell back to buffered I/O).
//   - The buffer pool of every experiment is smaller than its data set,
//     except experiment 3's, which must hold a 16 MiB ring (1/8 of the
//     pool); its table is larger than that pool. Experiment 3 measures
//     its "before" hit ratio once the foreground reached steady state.
//   - Every number in REPORT.md comes from the Result of the run that
//     writes it, or is a field report's figure (docs/design.md) or a
//     setting of the code, named as such; nothing is edited by hand. The
//     machine facts the sections compare with (read rates, O_DSYNC write
//     latency, sleep floor) are measured by the probe, section 0. A Table
//     refuses NaN and infinities, so every CSV cell is a finite number.
//   - Each section's headline is computed from its tables alone, so
//     CheckReport can recompute the committed headlines from the committed
//     CSV files. A conclusion ("the disk decides", "reproduced") is printed
//     only from a Rule stated beside it and the run's own figures.
//   - Experiment 5's standbys have replayed everything before each run
//     starts, so every run's lag is its own.
//
// # Files written to Config.OutDir
//
//	REPORT.md
//	exp0_machine_probe.csv
//	exp1_foreground.csv          exp1_p99_vs_delay.png exp1_vacuum_time_vs_delay.png
//	exp2_parallel.csv            exp2_time_vs_parallelism.png exp2_mbps_vs_parallelism.png
//	exp3_ring.csv                exp3_vacuum_time.png exp3_wal_flushes.png exp3_hit_ratio.png
//	exp4_tidstore_synthetic.csv  exp4_bytes_per_tid.png exp4_lookup_ns.png
//	exp4_index_passes.csv        exp4_index_passes.png exp4_vacuum_time_vs_mem.png
//	exp5_full_lag.csv            exp5_lag_series.csv exp5_lag_vs_time.png
//	exp6_throttle_accuracy.csv   exp6_cost_accuracy.png exp6_byte_accuracy.png
//	exp7_ratios.csv              exp7_pgbench.csv exp7_vacuum.csv
//	exp10_summary.csv            exp10_targets.csv exp10_runs.csv
package bench
