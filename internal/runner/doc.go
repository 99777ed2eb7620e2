// Package runner is vacuum-runner: the program every runner pod executes and the CLI a person
// runs against a local data directory. cmd/vacuum-runner is a thin main over Main.
//
// Commands (flags and JSON are a public contract, see internal/runner/runnerwire):
//
//	init    create a data directory
//	bloat   create a table, load rows, delete and update a fraction of them
//	stats   tables, pages, live and dead tuples, indexes
//	vacuum  lazy vacuum of some or all tables, throttled
//	full    VACUUM FULL of some or all tables, throttled
//	        (with --server HOST:PORT instead of --data: a live PostgreSQL, online,
//	        through package online; a RunSpec with a server target does the same in `run`)
//	check   verify every page and heap/index agreement
//	run     pod mode: a RunSpec, an HTTP server (/progress, /metrics, /healthz,
//	        PUT /throttle) and a Summary written to the termination log on exit
//
// Pod mode's HTTP API, on --listen (HTTPS with --tls-cert-file and --tls-key-file, as the
// operator runs it; at most --max-connections connections): GET /progress
// (runnerwire.Progress), GET /healthz, PUT /throttle, and GET /metrics (Prometheus, a private
// registry) unless --metrics-listen moves it, with /healthz, to a plain-HTTP port of its own.
// PUT /throttle (a runnerwire.Throttle; absent fields take their
// defaults). /throttle needs "Authorization: Bearer <token>" matching --control-token-file:
// 401 without it, 403 for every request when no token file was given, 400 for a body that
// is not a valid Throttle, 413 over 16 KiB, 202 when the run has not started yet (the
// throttle is kept for it), 409 once it has finished, else 200 with the applied throttle.
//
// Golden JSON: cmd/vacuum-runner's tests write internal/runner/runnerwire/testdata/*.golden.json
// from the real binary (go test ./cmd/vacuum-runner -run TestGolden -update) and fail when
// an output's shape (keys and value types) no longer matches them.
//
// Invariants:
//   - Every outcome maps to one exit code (api.Exit*): bad input 2, busy 3, corruption 4,
//     cancelled 5, no space 6, needs crash recovery 7, anything else 1 (a recovered panic
//     too). exitCode in errors.go is the one place that decides. Online: an unreachable
//     server is 3, an authentication failure or refusal 2, a written field the server
//     cannot honour 2 (naming the flag or RunSpec field).
//   - A bad flag or spec is reported on stderr in one line naming the flag and what is wrong.
//   - Outputs never omit a field (the api types), and `run` writes a Summary of at most
//     api.MaxSummaryBytes to --termination-log whatever the outcome, once its flags parsed.
//   - The control token is read once, compared in constant time and never logged.
//   - Before opening a data directory for a vacuum, the memory the run needs
//     (api.MemoryRequirement) is compared with the cgroup memory limit, if any. The cgroup
//     file system root is /sys/fs/cgroup, or $VACUUM_RUNNER_CGROUP_ROOT when set (tests).
package runner
