#!/usr/bin/env bash
# vulncheck.sh: check the module's dependencies (and the Go standard library) against the Go
# vulnerability database without network access to vuln.go.dev, which is unreachable here.
#
# The database is built locally from the golang.org/x/vulndb module, which the Go module proxy
# serves: its data/osv directory holds every report as OSV JSON, and its cmd/indexdb writes the
# v1 database layout (index/db.json, index/modules.json, index/vulns.json, ID/<id>.json) that
# `govulncheck -db file://...` reads. Both the database and govulncheck are cached under
# VULNCHECK_CACHE (first run: ~10 minutes of module downloads; later runs: about a minute).
#
#   hack/vulncheck.sh            # govulncheck ./... through the gate (hack/vulngate)
#   VULNCHECK_ALLOW_STDLIB=1 hack/vulncheck.sh   # the same, standard-library findings reported only
#   hack/vulncheck.sh -show verbose ./cmd/...    # plain govulncheck with these arguments
#
# Pin newer data with VULNDB_VERSION=<pseudo-version of golang.org/x/vulndb>.
set -euo pipefail
# shellcheck source=hack/toolchain.sh
source "$(dirname "${BASH_SOURCE[0]}")/toolchain.sh"

VULNDB_VERSION="${VULNDB_VERSION:-v0.0.0-20261105234957-e22db6528018}"
VULN_VERSION="${VULN_VERSION:-v1.9.0}"
CACHE="${VULNCHECK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/vacuum-operator/vulncheck}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

db="$CACHE/db-$VULNDB_VERSION"
bin="$CACHE/govulncheck-$VULN_VERSION"
mkdir -p "$CACHE"

# Module downloads run outside this module (a scratch directory, no go.mod), so go.mod and
# go.sum are never touched.
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT

if [ ! -f "$db/index/db.json" ]; then
	echo "vulncheck: building the vulnerability database from golang.org/x/vulndb@$VULNDB_VERSION" >&2
	src="$(cd "$scratch" && GOFLAGS=-mod=mod go mod download -json "golang.org/x/vulndb@$VULNDB_VERSION" |
		sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
	if [ -z "$src" ] || [ ! -d "$src/data/osv" ]; then
		echo "vulncheck: golang.org/x/vulndb@$VULNDB_VERSION has no data/osv directory" >&2
		exit 1
	fi
	rm -rf "$db.tmp"
	(cd "$scratch" && GOFLAGS=-mod=mod go run "golang.org/x/vulndb/cmd/indexdb@$VULNDB_VERSION" \
		-vulns "$src/data/osv" -out "$db.tmp")
	mv "$db.tmp" "$db" # only a complete database is ever used
fi

if [ ! -x "$bin/govulncheck" ]; then
	echo "vulncheck: installing golang.org/x/vuln/cmd/govulncheck@$VULN_VERSION" >&2
	(cd "$scratch" && GOBIN="$bin" go install "golang.org/x/vuln/cmd/govulncheck@$VULN_VERSION")
fi

echo "vulncheck: database golang.org/x/vulndb@$VULNDB_VERSION ($(ls "$db/ID" | grep -c '\.json$') entries)" >&2
cd "$ROOT"
if [ "$#" -gt 0 ]; then
	exec "$bin/govulncheck" -db "file://$db" "$@"
fi
# The gate: govulncheck's JSON through hack/vulngate, which fails on every reachable
# vulnerability in a module dependency or in the standard library of the pinned toolchain
# (VULNCHECK_ALLOW_STDLIB=1 reports standard-library findings without failing).
out="$scratch/govulncheck.json"
rc=0
"$bin/govulncheck" -db "file://$db" -format json ./... >"$out" || rc=$?
if [ "$rc" -ne 0 ]; then
	echo "vulncheck: govulncheck failed (exit $rc)" >&2
	exit "$rc"
fi
gate_args=()
if [ "${VULNCHECK_ALLOW_STDLIB:-0}" = 1 ]; then
	gate_args+=(--allow-stdlib)
fi
go run ./hack/vulngate "${gate_args[@]}" <"$out"
