package controllers

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
)

func TestObjectsAreIndexedByTheUIDOfTheirControllerOnly(t *testing.T) {
	gv := vacuumv1alpha1.GroupVersion.String()
	policy := metav1.OwnerReference{APIVersion: gv, Kind: "VacuumPolicy", Name: "p", UID: "uid-p", Controller: ptr.To(true)}
	owner := metav1.OwnerReference{APIVersion: gv, Kind: "VacuumPolicy", Name: "q", UID: "uid-q"}
	run := metav1.OwnerReference{APIVersion: gv, Kind: "VacuumRun", Name: "r", UID: "uid-r", Controller: ptr.To(true)}
	for _, tc := range []struct {
		name string
		obj  client.Object
		refs []metav1.OwnerReference
		want []string
	}{
		{"run controlled by its policy", &vacuumv1alpha1.VacuumRun{}, []metav1.OwnerReference{owner, policy}, []string{"uid-p"}},
		{"run owned but not controlled", &vacuumv1alpha1.VacuumRun{}, []metav1.OwnerReference{owner}, nil},
		{"run made by hand", &vacuumv1alpha1.VacuumRun{}, nil, nil},
		{"pod controlled by its run", &corev1.Pod{}, []metav1.OwnerReference{run}, []string{"uid-r"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.obj.SetOwnerReferences(tc.refs)
			if got := controllerUID(tc.obj); !slices.Equal(got, tc.want) {
				t.Errorf("index keys %q, want %q", got, tc.want)
			}
		})
	}
}

// A policy's reconcile asks to be woken at its next tick and hardly later: every moment of
// the wait's slack is added to the start of each of its runs.
func TestAScheduledPolicyIsWokenAtItsNextTick(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 7, 300_000_000, time.UTC)
	p := &vacuumv1alpha1.VacuumPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "orders",
		CreationTimestamp: metav1.NewTime(now.Add(-5 * time.Second))}}
	p.Spec.Schedule = "@every 20s"
	r := &PolicyReconciler{Clock: clocktesting.NewFakePassiveClock(now)}
	res, err := r.startDueRuns(context.Background(), p, nil)
	if err != nil {
		t.Fatal(err)
	}
	sched, err := parseSchedule(p)
	if err != nil {
		t.Fatal(err)
	}
	wait := sched.Next(now).Sub(now)
	if res.RequeueAfter < wait || res.RequeueAfter > wait+100*time.Millisecond {
		t.Errorf("requeued after %s; the next tick is in %s", res.RequeueAfter, wait)
	}
}
