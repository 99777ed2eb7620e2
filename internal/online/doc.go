// Package online vacuums the tables of a running database server through its SQL interface,
// the way vacuumdb does, with a throttle, progress and a VERBOSE-style report: the online
// half of vacuum-runner (`vacuum-runner vacuum --server HOST:PORT`, and `run` with a RunSpec
// whose target is a server).
//
// The server is a real PostgreSQL (any supported major version) or the project's engine
// server; Detect tells them apart (version() and server_version_num). This package
// vacuums PostgreSQL today; an engine server is detected and refused until its SQL surface
// (vacuum_set_throttle, the vacuumops views) exists.
//
// Connections follow libpq's conventions (Target): HOST:PORT, database, user (else PGUSER,
// else the OS user), the password from a file, PGPASSWORD or ~/.pgpass, and an sslmode of
// disable, require, verify-ca or verify-full. Authentication answers only SCRAM-SHA-256 (or
// no authentication at all) unless the sslmode verifies the server; with a verified server a
// cleartext password is answered too (it travels inside TLS to a server whose certificate
// was checked, as cloud IAM tokens do). MD5 is never answered. The refusal happens before
// any password byte is sent (pgconn's require_auth, libpq's require_auth semantics).
//
// Invariants:
//   - Every failure to connect is classified: ErrUnreachable (refused, timed out, the server
//     not accepting connections yet: retry) or ErrAuth (wrong password, refused
//     authentication method, TLS verification, unknown database: bad input).
//   - A field the caller wrote that the server cannot honour (a byte-rate limit on
//     PostgreSQL, ringSize before PostgreSQL 16, PARALLEL with FULL) is refused before any
//     table is touched, naming the field (*FieldError).
//   - Each table is vacuumed on one of Parallelism sessions; each session is set up with the
//     table's throttle (vacuum_cost_* and maintenance_work_mem, only the values the caller
//     wrote besides the cost throttle) right before its VACUUM, so a throttle change applies
//     from the next table: PostgreSQL cannot re-throttle a running manual VACUUM.
//   - On cancellation every running VACUUM is cancelled with pg_cancel_backend from a
//     separate connection, and Run returns only once pg_stat_activity shows none of them
//     still running (or after a bounded wait, with an error saying so).
package online
