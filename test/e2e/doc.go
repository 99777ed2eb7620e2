// Package e2e holds the end-to-end suite: on the local dev cluster (internal/devcluster:
// envtest's control plane, the manager built from ./cmd/manager as its own process, and the
// local node running the real vacuum-runner on real engine data directories), it checks what
// a user of the operator sees. Run it with `make test-e2e` (part of `make test`) or
// `go test ./test/e2e/ -v`; E2E_SKIP=1 skips it.
package e2e
