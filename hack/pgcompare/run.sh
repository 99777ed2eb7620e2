#!/usr/bin/env bash
# Cold, unthrottled lazy VACUUM of the same 2M-row table in the bundled engine and in
# PostgreSQL 15, timed side by side (see hack/pgcompare/main.go and
# docs/benchmarks/vacuum-speed.md). Run as root from the repository root:
#
#   hack/pgcompare/run.sh                 # 2,000,000 rows, 3 cold runs per side
#   hack/pgcompare/run.sh --rows 100000 --runs 1 --direct
#
# Root is needed to drop the OS page cache before each timed VACUUM; PostgreSQL itself runs
# as the unprivileged user given by --pg-user (default nobody). Built tables are cached under
# $TMPDIR/vacuum-bench-cache (--cache); PostgreSQL's cluster lives in a temporary directory
# that is removed at the end (--keep keeps it).
set -euo pipefail
# shellcheck source=hack/toolchain.sh
source "$(dirname "${BASH_SOURCE[0]}")/../toolchain.sh"
cd "$(dirname "$0")/../.."
mkdir -p bin
go build -o bin/pgcompare ./hack/pgcompare
go build -o bin/vacuum-runner ./cmd/vacuum-runner
exec bin/pgcompare "$@"
