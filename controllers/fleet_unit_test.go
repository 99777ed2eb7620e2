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
	"sigs.k8s.io/controller-runtime/pkg/event"

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
// the wait's slack is added to the start of each of its runs. The ticks of "@every D" are
// counted from the policy's last tick (its creation before the first), as a CronJob counts
// them: a reconcile between two ticks (its run's progress) neither pushes the next tick out
// to D after itself nor writes a new status.nextScheduleTime.
func TestAScheduledPolicyIsWokenAtItsNextTick(t *testing.T) {
	created := time.Date(2026, 12, 2, 12, 0, 2, 0, time.UTC)
	at := func(sec, ms int) time.Time {
		return time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC).Add(time.Duration(sec)*time.Second + time.Duration(ms)*time.Millisecond)
	}
	for _, tc := range []struct {
		name      string
		schedule  string
		lastTick  time.Time // zero: none yet
		now, want time.Time
	}{
		{"the first tick of @every, counted from the creation", "@every 20s", time.Time{}, at(7, 300), at(22, 0)},
		{"@every between two ticks", "@every 20s", at(22, 0), at(30, 500), at(42, 0)},
		{"@every later between the same two ticks", "@every 20s", at(22, 0), at(41, 900), at(42, 0)},
		{"@every with a tick missed (the run of 42 s was not started)", "@every 20s", at(22, 0), at(50, 0), at(62, 0)},
		{"a cron expression", "*/5 * * * *", at(0, 0), at(7, 300), at(300, 0)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &vacuumv1alpha1.VacuumPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "orders",
				CreationTimestamp: metav1.NewTime(created)}}
			p.Spec.Schedule = tc.schedule
			p.Spec.ConcurrencyPolicy = vacuumv1alpha1.ForbidConcurrent
			if !tc.lastTick.IsZero() {
				p.Status.LastScheduleTime = &metav1.Time{Time: tc.lastTick}
			}
			// An active run keeps a due tick from starting (Forbid), so no client is needed.
			active := []*vacuumv1alpha1.VacuumRun{{ObjectMeta: metav1.ObjectMeta{Name: "orders-1"}}}
			r := &PolicyReconciler{Clock: clocktesting.NewFakePassiveClock(tc.now), Recorder: &recorder{}}
			res, err := r.startDueRuns(context.Background(), p, active)
			if err != nil {
				t.Fatal(err)
			}
			wait := tc.want.Sub(tc.now)
			if res.RequeueAfter < wait || res.RequeueAfter > wait+100*time.Millisecond {
				t.Errorf("requeued after %s; the next tick is in %s", res.RequeueAfter, wait)
			}
			if got := p.Status.NextScheduleTime; got == nil || !got.Time.Equal(tc.want) {
				t.Errorf("status.nextScheduleTime %v, want %s", got, tc.want)
			}
		})
	}
}

// A policy's own status patch comes back as an update of the policy: reconciling it again
// finds nothing to do, and at 1,000 policies it doubled the work queue's load. Edits by a
// user (spec, annotations such as run-now, deletion) still wake it.
func TestAPolicyIsWokenByItsSpecAndMetadataNotByItsOwnStatus(t *testing.T) {
	base := &vacuumv1alpha1.VacuumPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "orders",
		ResourceVersion: "1", Generation: 1}}
	base.Spec.Schedule = "@every 20s"
	for _, tc := range []struct {
		name string
		edit func(*vacuumv1alpha1.VacuumPolicy)
		wake bool
	}{
		{"its status patch", func(p *vacuumv1alpha1.VacuumPolicy) {
			p.Status.LastScheduleTime = &metav1.Time{Time: time.Unix(1_800_000_000, 0)}
			p.Status.Active = []string{"orders-1"}
			p.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "manager", Subresource: "status"}}
		}, false},
		{"a spec edit", func(p *vacuumv1alpha1.VacuumPolicy) { p.Spec.Schedule = "@every 1m"; p.Generation++ }, true},
		{"a run-now annotation", func(p *vacuumv1alpha1.VacuumPolicy) {
			p.Annotations = map[string]string{vacuumv1alpha1.AnnotationRunNow: "now"}
		}, true},
		{"its deletion", func(p *vacuumv1alpha1.VacuumPolicy) { p.DeletionTimestamp = &metav1.Time{Time: time.Now()} }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			updated := base.DeepCopy()
			tc.edit(updated)
			updated.ResourceVersion = "2"
			if got := policyChanged.Update(event.UpdateEvent{ObjectOld: base, ObjectNew: updated}); got != tc.wake {
				t.Errorf("woken: %v, want %v", got, tc.wake)
			}
		})
	}
}

// A run's status changes at every step (finalizer, token record, progress polls) but its
// policy reads only its phase, its spec and metadata, and an ended run's figures: only those
// changes wake the policy.
func TestAPolicyIsWokenByItsRunsPhaseAndEndNotByTheirProgress(t *testing.T) {
	base := &vacuumv1alpha1.VacuumRun{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "orders-1",
		ResourceVersion: "1", Generation: 1}}
	base.Status.Phase = vacuumv1alpha1.RunRunning
	for _, tc := range []struct {
		name string
		edit func(*vacuumv1alpha1.VacuumRun)
		wake bool
	}{
		{"a progress poll", func(r *vacuumv1alpha1.VacuumRun) {
			r.Status.PagesPerSecond = 1200
			r.Status.Message = "vacuuming"
		}, false},
		{"its finalizer", func(r *vacuumv1alpha1.VacuumRun) { r.Finalizers = []string{vacuumv1alpha1.FinalizerRun} }, false},
		{"its token record", func(r *vacuumv1alpha1.VacuumRun) {
			r.Status.TokenSecret = &vacuumv1alpha1.OwnedObject{Name: "orders-1-token-x"}
		}, false},
		{"its end", func(r *vacuumv1alpha1.VacuumRun) {
			r.Status.MarkSucceeded(r.Generation, metav1.Now(), "done")
		}, true},
		{"a cancel", func(r *vacuumv1alpha1.VacuumRun) { r.Spec.Cancel = true; r.Generation++ }, true},
		{"its policy-throttle annotation", func(r *vacuumv1alpha1.VacuumRun) {
			r.Annotations = map[string]string{vacuumv1alpha1.AnnotationPolicyThrottle: "abc"}
		}, true},
		{"its deletion", func(r *vacuumv1alpha1.VacuumRun) { r.DeletionTimestamp = &metav1.Time{Time: time.Now()} }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			updated := base.DeepCopy()
			tc.edit(updated)
			updated.ResourceVersion = "2"
			if got := runChangedForPolicy.Update(event.UpdateEvent{ObjectOld: base, ObjectNew: updated}); got != tc.wake {
				t.Errorf("woken: %v, want %v", got, tc.wake)
			}
		})
	}

	// A policy sums its new run up as Pending when it creates it, so the run's first status
	// patch, which marks it Pending, changes nothing the policy would write; its start does.
	fresh := base.DeepCopy()
	fresh.Status = vacuumv1alpha1.VacuumRunStatus{}
	for _, tc := range []struct {
		name  string
		phase vacuumv1alpha1.RunPhase
		wake  bool
	}{
		{"its first phase, Pending", vacuumv1alpha1.RunPending, false},
		{"its start, before any phase", vacuumv1alpha1.RunRunning, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			updated := fresh.DeepCopy()
			updated.Status.Phase, updated.ResourceVersion = tc.phase, "2"
			if got := runChangedForPolicy.Update(event.UpdateEvent{ObjectOld: fresh, ObjectNew: updated}); got != tc.wake {
				t.Errorf("woken: %v, want %v", got, tc.wake)
			}
		})
	}

	t.Run("any update of an ended run", func(t *testing.T) {
		ended := base.DeepCopy()
		ended.Status.MarkFailed(1, metav1.Now(), vacuumv1alpha1.ReasonCorruptionFound, "bad page")
		later := ended.DeepCopy()
		later.Status.Message = "bad page 7"
		if !runChangedForPolicy.Update(event.UpdateEvent{ObjectOld: ended, ObjectNew: later}) {
			t.Error("an ended run's update did not wake its policy")
		}
	})
}

// A run's own status patches that keep its phase (its token's record, its pod's, progress)
// are written by a reconcile that scheduled its next look already: they wake nothing. Its
// phase, a failed attempt, its end, its spec and its metadata do.
func TestARunIsWokenByItsPhaseAndSpecNotByItsOwnProgress(t *testing.T) {
	base := &vacuumv1alpha1.VacuumRun{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "orders-1",
		ResourceVersion: "1", Generation: 1, Finalizers: []string{vacuumv1alpha1.FinalizerRun}}}
	base.Status.MarkPending(1, vacuumv1alpha1.ReasonPodPending, "waiting for runner pod orders-1-1 to start: not scheduled yet")
	base.Status.Attempts = 1
	for _, tc := range []struct {
		name string
		edit func(*vacuumv1alpha1.VacuumRun)
		wake bool
	}{
		{"its token record", func(r *vacuumv1alpha1.VacuumRun) {
			r.Status.TokenSecret = &vacuumv1alpha1.OwnedObject{Name: "orders-1-token-x"}
		}, false},
		{"a new waiting cause", func(r *vacuumv1alpha1.VacuumRun) {
			r.Status.MarkPending(1, vacuumv1alpha1.ReasonPodPending, "waiting for runner pod orders-1-1 to start: ContainerCreating")
		}, false},
		{"its start", func(r *vacuumv1alpha1.VacuumRun) { r.Status.MarkRunning(1, "vacuuming") }, true},
		{"a failed attempt", func(r *vacuumv1alpha1.VacuumRun) { r.Status.FailedAttempts = 1 }, true},
		{"its end", func(r *vacuumv1alpha1.VacuumRun) {
			r.Status.MarkFailed(1, metav1.Now(), vacuumv1alpha1.ReasonPodNotStarted, "not started")
		}, true},
		{"a cancel", func(r *vacuumv1alpha1.VacuumRun) { r.Spec.Cancel = true; r.Generation++ }, true},
		{"its deletion", func(r *vacuumv1alpha1.VacuumRun) { r.DeletionTimestamp = &metav1.Time{Time: time.Now()} }, true},
		{"its finalizer's removal", func(r *vacuumv1alpha1.VacuumRun) { r.Finalizers = nil }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			updated := base.DeepCopy()
			tc.edit(updated)
			updated.ResourceVersion = "2"
			if got := runWakesItself.Update(event.UpdateEvent{ObjectOld: base, ObjectNew: updated}); got != tc.wake {
				t.Errorf("woken: %v, want %v", got, tc.wake)
			}
		})
	}

	t.Run("a progress poll of a running run", func(t *testing.T) {
		running := base.DeepCopy()
		running.Status.MarkRunning(1, "vacuuming")
		polled := running.DeepCopy()
		polled.Status.PagesPerSecond, polled.ResourceVersion = 1200, "2"
		if runWakesItself.Update(event.UpdateEvent{ObjectOld: running, ObjectNew: polled}) {
			t.Error("a progress poll woke its own run")
		}
	})
}
