package controllers

import (
	"fmt"
	"hash/fnv"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
)

// Names other programs (the kubectl plugin) derive the way the controllers do, so there is
// one rule for each.

// RunNowRunName is the run a policy makes for the run-now annotation's value v.
func RunNowRunName(policy, v string) string {
	h := fnv.New32a()
	h.Write([]byte(v))
	return fmt.Sprintf("%s-now-%08x", policy, h.Sum32())
}

// LockLeaseName is the Lease a run takes before it starts: its volume's, or for an online
// run its server's once identified; "" when the run takes none yet.
func LockLeaseName(run *vacuumv1alpha1.VacuumRun) string { return lockName(run) }

// RunnerContainer is the name of the runner container of a run's pods.
const RunnerContainer = runnerContainer
