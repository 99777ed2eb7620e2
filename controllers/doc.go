// Package controllers holds the reconcilers of VacuumPolicy and VacuumRun.
//
// Invariants the code keeps:
//   - No in-memory schedule: the policy controller derives the due tick from
//     status.lastScheduleTime and the clock, and requeues itself for the next tick.
//   - Child names are deterministic (<policy>-<unix minutes>, <policy>-once,
//     <policy>-now-<hash>, <run>-<attempt>, <run>-token), so AlreadyExists means adopt and a
//     retried reconcile or a restarted manager never duplicates anything.
//   - At most one run works on a PVC at a time: the run must hold the PVC's Lease before it
//     quiesces anything or makes a pod, and gives it back only once its pods have stopped.
//   - A quiesced workload carries its restore count in an annotation written in the same
//     patch that scales it to 0.
//   - Each controller writes status in one place (patchRunStatus, patchPolicyStatus), with
//     observedGeneration, by merge patch.
//   - The manager never lists, watches or caches Secrets; run tokens are recomputed
//     (HMAC-SHA256 of the run UID under the manager's key) and never logged.
//   - The runner's JSON is read and written only through internal/runner/api.
package controllers
