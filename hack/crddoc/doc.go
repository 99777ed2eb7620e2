// Command crddoc writes the API reference (docs/api.md) from the generated CRDs in
// config/crd/bases: for each kind, the printer columns and one Markdown table per top-level
// section (spec, status) with every field's path, type, default, validation and description.
//
// The schema is the single source: controller-gen writes it from the markers and godoc of
// api/v1alpha1, and this command only reads it, so the reference cannot drift from what the
// API server enforces. `make docs` regenerates the file; `go run ./hack/crddoc --check` (part
// of `make verify-generated`) exits 1 when the file on disk differs from what it would write.
//
// Usage:
//
//	go run ./hack/crddoc [--crds config/crd/bases] [--out docs/api.md] [--collapse spec.affinity,...] [--check]
package main
