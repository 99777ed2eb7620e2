// Package runnerwire holds the wire contract between a runner pod (cmd/vacuum-runner run) and the
// operator: the JSON both sides read and write, and the rules both sides apply to it.
//
//   - RunSpec is what `run --spec` (or --spec-file) takes: one execution's resolved settings.
//   - Throttle is the body of `PUT /throttle`, and the throttle of a RunSpec and of each of its
//     per-table overrides.
//   - Progress is what `GET /progress` returns while the run works.
//   - Summary is what the runner writes to its termination log on exit (at most
//     MaxSummaryBytes bytes, see TruncateSummary); its totals and tables have the shape of
//     `vacuum --json` (Report).
//
// Invariants of the JSON:
//   - Field names are camelCase and match the VacuumPolicy/VacuumRun CRD fields.
//   - Durations are Go duration strings ("2ms"); byte sizes and byte rates are Kubernetes
//     quantity strings ("50Mi"); cost limits and page costs are integers. There are no
//     floats in inputs.
//   - Inputs (RunSpec, Throttle, TableOverride) use pointers with omitempty: an absent field
//     means "the default" (or, in a per-table override, "the run's value"). For byte rates,
//     0 means "no limit".
//   - Outputs (Progress, Summary, Report and what they hold) never use omitempty: every field
//     is always present, so a reader can tell 0 from "not reported".
//   - Defaults and ranges live here once (Resolve, MemoryRequirement) and are used by the
//     runner and by the operator, so the two cannot disagree.
//
// The golden files in testdata/ are the contract's examples; the operator's tests serve them
// as a stand-in runner, and the runner's tests regenerate them from the real binary.
package runnerwire
