// Package traffic holds the engine server's real-client tests beside traffic: PostgreSQL 15's
// own pgbench, unmodified, drives the engine-server binary (built once per test run from
// cmd/engine-server, without -race, as a subprocess) while VACUUM, re-throttles, SIGKILLs and
// hostile clients act beside it. `pgbench -i -s 2` runs once per test binary; each test's
// server starts over a copy of the data directory it made. They live under test/ so that `make test` runs them once,
// without -race: the server under test is a separate process either way.
//
// pgbench and psql come from Debian's postgresql-client-15 (/usr/lib/postgresql/15/bin); as
// root a test installs it when it is missing, otherwise it fails saying what to install.
//
// Flags: -traffic.kills N sets the SIGKILLs of the durability test (5 by default, 20 for the
// issue's long variant).
package traffic
