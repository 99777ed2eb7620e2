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
//   - Quiesce touches a workload only through its scale subresource; the count to restore is
//     recorded on the VacuumRun (an annotation) before the workload is scaled to 0.
//   - Each controller writes status in one place (patchRunStatus, patchPolicyStatus), with
//     observedGeneration, by merge patch; the patch that ends a run carries its
//     resourceVersion, so a run is ended, and counted in the metrics, once.
//   - Nothing is written back whole: writes that are not meant to change a spec are status
//     or metadata patches. The policy writes a run's spec.throttle only when its own throttle
//     changed (a hash in the run's policy-throttle annotation), so a hand edit of a run's
//     throttle stays.
//   - The manager never lists, watches or caches Secrets; run tokens are recomputed
//     (HMAC-SHA256 of the run UID under the manager's key) and never logged.
//   - The runner's JSON is read and written only through internal/runner/runnerwire.
package controllers
