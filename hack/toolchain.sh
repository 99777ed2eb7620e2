# Sourced by every hack/ script that runs `go`: pins the Go toolchain to go.mod's `go` line.
# The machine's own Go (1.26.8 here, with GOTOOLCHAIN=local in its go.env) does not switch
# toolchains by itself; the module proxy serves the pinned one (fetched once per machine).
# The Makefile and .ci/run pin it the same way, so a script run on its own agrees with make.
_toolchain_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
GOTOOLCHAIN="go$(awk '$1 == "go" { print $2; exit }' "$_toolchain_root/go.mod")"
export GOTOOLCHAIN
unset _toolchain_root
