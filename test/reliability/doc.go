// Package reliability holds black-box reliability tests that need built
// binaries or generated manifests: malformed data directories given to the
// vacuum-runner binary, and least privilege of the manager's generated
// RBAC. The engine-level fault, corruption and crash tests live next to
// the engine (internal/engine/*_reliability_test.go) and in internal/soak.
package reliability
