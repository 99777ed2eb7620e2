#!/usr/bin/env bash
# What a throttled VACUUM does to a light foreground load on the engine server, transaction by
# transaction: pgbench select-only at a fixed rate with its per-transaction log, a VACUUM of
# pgbench_accounts at one cost delay beside it, then the load's p99 alone and during, its p99
# per second of the VACUUM, the slowest 1 % with their times, and (with --poll) the server's
# own p99 beside pgbench's over the same 10-second windows (docs/benchmarks/online-cost.md,
# "Checkpoints, not the VACUUM"). Run from the repository root; needs pgbench, psql, python3.
#
#   hack/fgprobe/run.sh --delay 1.5ms                                 # one probe
#   hack/fgprobe/run.sh --delay 1.5ms --late-update -- --checkpoint-wal-size 512Mi
#   hack/fgprobe/run.sh --no-vacuum --late-update                     # the control
#
# The data directory (pgbench -i -s 40, a 1 GiB pool that holds it) is built once under
# --dir and reused; each probe gets its own directory there with the raw logs.
set -euo pipefail
# shellcheck source=hack/toolchain.sh
source "$(dirname "${BASH_SOURCE[0]}")/../toolchain.sh"
cd "$(dirname "$0")/../.."

delay=1.5ms nice=5 seconds=30 poll="" late="" novac="" dir=/tmp/fgprobe tag="" port=55432
while [ $# -gt 0 ]; do
	case $1 in
	--delay) delay=$2; shift 2 ;;
	--nice) nice=$2; shift 2 ;;
	--seconds) seconds=$2; shift 2 ;;
	--poll) poll=$2; shift 2 ;;
	--late-update) late=1; shift ;;
	--no-vacuum) novac=1; shift ;;
	--dir) dir=$2; shift 2 ;;
	--tag) tag=$2; shift 2 ;;
	--port) port=$2; shift 2 ;;
	--) shift; break ;;
	*) echo "fgprobe: unknown flag $1" >&2; exit 2 ;;
	esac
done
mkdir -p bin "$dir"
go build -o bin/engine-server ./cmd/engine-server
out=$dir/${tag:-probe-$(date +%H%M%S)}
rm -rf "$out"; mkdir -p "$out"
init=""
[ -d "$dir/data" ] || init=--init
bin/engine-server serve --data "$dir/data" $init --buffer-pool 1Gi --listen 127.0.0.1:$port --auth trust \
	--vacuum-nice "$nice" "$@" >"$out/serve.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
for _ in $(seq 100); do pg_isready -q -h 127.0.0.1 -p $port && break; sleep 0.2; done
export PGHOST=127.0.0.1 PGPORT=$port PGUSER=postgres PGDATABASE=postgres
[ -z "$init" ] || pgbench -q -i -I dtgp -s 40 >"$out/init.log" 2>&1
bloat() { psql -qc "UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid % 10 = 0"; }
# The bloating UPDATE: long before the VACUUM, or (--late-update) 1 s before it, as experiment 10 does.
[ -n "$late" ] || { bloat; sleep 1; }
(cd "$out" && pgbench -n -S -M prepared -R 400 -c 2 -j 2 -T "$seconds" -l --log-prefix=tx >pgbench.out 2>&1) &
load=$!
sleep 8
[ -z "$late" ] || { bloat; sleep 1; }
date +%s.%N >"$out/vacuum.start"
(
	if [ -n "$novac" ]; then sleep 3600; fi
	psql -qc "SET vacuum_cost_delay = '$delay'" -c "SET vacuum_cost_limit = 200" -c "VACUUM pgbench_accounts" >"$out/vacuum.out" 2>&1
	date +%s.%N >"$out/vacuum.done"
) &
if [ -n "$poll" ]; then
	# One session polls what package online polls: the server's own latency view and the progress.
	while [ ! -f "$out/vacuum.done" ] && kill -0 $load 2>/dev/null; do
		date +%s.%N >>"$out/poll.times"
		echo "SELECT window_seconds, count, p50_us, p99_us FROM vacuumops_statement_latency WHERE kind = 'all';"
		echo "SELECT pid, phase, heap_blks_scanned FROM pg_stat_progress_vacuum;"
		sleep "$poll"
	done | psql -q >"$out/poll.out" 2>&1 &
fi
wait $load
if [ -f "$out/vacuum.done" ]; then cp "$out/vacuum.done" "$out/vacuum.end"; else
	date +%s.%N >"$out/vacuum.end"
	echo "the VACUUM was still running when the load ended: judged up to there"
fi
kill $server; wait $server || true
trap - EXIT
python3 hack/fgprobe/analyse.py "$out"
