// Package docs holds the project's documents (design.md, the benchmark report, the reliability
// notes, the generated API reference) and the tests that keep them true to the code: the
// package maps of design.md and internal/engine/ARCHITECTURE.md against `go list`, and no
// reference from a tracked file to a document outside the repository.
package docs
