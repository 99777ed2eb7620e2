package e2e

import (
	"fmt"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
)

// Windows seconds apart: the suite's manager runs with --window-schedule-seconds, so a
// window schedule may have a leading seconds field.
const (
	windowPeriod   = 12 * time.Second
	windowSchedule = "*/12 * * * * *"
	windowSeconds  = 6
)

// policyRuns lists a policy's runs, oldest first.
func policyRuns(ns, policy string) []vacuumv1alpha1.VacuumRun {
	GinkgoHelper()
	var list vacuumv1alpha1.VacuumRunList
	Expect(cluster.Client.List(suiteCtx, &list, client.InNamespace(ns), client.MatchingLabels{vacuumv1alpha1.LabelPolicy: policy})).To(Succeed())
	runs := list.Items
	slices.SortFunc(runs, func(a, b vacuumv1alpha1.VacuumRun) int {
		return a.CreationTimestamp.Compare(b.CreationTimestamp.Time)
	})
	return runs
}

var _ = Describe("A maintenance window", func() {
	It("vacuums a table two windows cannot finish across three or more, removing what one uninterrupted run removes", func() {
		ns := newNamespace()
		// Two identical volumes (bloat's default seed): 1,084 heap pages, 29,134 cost units
		// unthrottled on 8896654, at 1,800 units/s about 16 s, so two 6 s windows cannot
		// finish it (asserted below from the uninterrupted run) and three or more do. (20,000
		// rows cost 23,697 units before the visibility-map page stayed pinned, 22,346 after:
		// 12.4 s, and the uninterrupted run once took exactly two windows' 12 s.) One is
		// vacuumed by the windowed policy, the other in one run at the same throttle.
		table := bloatTable{name: "t", rows: 26_000, payload: 300, deleted: 0.3}
		dir, dead := makeVolume(ns, "windowed", table)
		refDir, refDead := makeVolume(ns, "whole", table)
		Expect(dead).To(Equal(refDead), "both volumes are built from the same seed")
		th := costThrottle(10*time.Millisecond, 18)

		whole := policy(ns, "whole", "whole", vacuumv1alpha1.VacuumModeLazy, th)
		windowed := policy(ns, "windowed", "windowed", vacuumv1alpha1.VacuumModeLazy, th)
		windowed.Spec.Window = &vacuumv1alpha1.Window{Schedule: windowSchedule, DurationSeconds: windowSeconds,
			StopGracePeriodSeconds: ptr.To(int64(5))}
		// Interrupted runs count as succeeded for the history limit (3 by default): keep every
		// window's run, however many windows the machine needs.
		windowed.Spec.SuccessfulRunsHistoryLimit = ptr.To(int32(20))
		// The windowed policy's first run starts at the next opening (a policy never starts
		// inside the window it was created in), the uninterrupted one at once.
		Expect(cluster.Client.Create(suiteCtx, windowed)).To(Succeed())
		Expect(cluster.Client.Create(suiteCtx, whole)).To(Succeed())

		By("waiting for three windows' runs")
		var runs []vacuumv1alpha1.VacuumRun
		Eventually(func(g Gomega) {
			runs = policyRuns(ns, "windowed")
			succeeded := false
			for _, r := range runs {
				if r.Status.Phase.IsFinal() && r.Status.Phase != vacuumv1alpha1.RunInterrupted && r.Status.Phase != vacuumv1alpha1.RunSucceeded {
					StopTrying(fmt.Sprintf("run %s ended %s: %s", r.Name, r.Status.Phase, r.Status.Message)).Now()
				}
				succeeded = succeeded || r.Status.Phase == vacuumv1alpha1.RunSucceeded
			}
			g.Expect(succeeded).To(BeTrue(), "%d runs, none succeeded yet", len(runs))
		}).WithTimeout(6 * windowPeriod).WithPolling(250 * time.Millisecond).Should(Succeed())
		ref := waitPhase(runOf(ns, "whole"), vacuumv1alpha1.RunSucceeded, time.Minute)
		elapsed := ref.Status.CompletionTime.Sub(ref.Status.StartTime.Time)
		GinkgoWriter.Printf("the uninterrupted run took %s at the same throttle (windows of %ds)\n", elapsed, windowSeconds)
		Expect(elapsed).To(BeNumerically(">", 2*windowSeconds*time.Second), "two windows could have finished the table; make it bigger")

		// How many windows beyond three it takes depends on the machine's speed under the
		// throttle (each window also pays its pod's start); at least three, each kept.
		Expect(len(runs)).To(BeNumerically(">=", 3), "the table took %d windows, want at least 3", len(runs))
		var removed int64
		var reached int64
		for i, r := range runs {
			GinkgoWriter.Printf("window %d: run %s %s, tables %s\n", i+1, r.Name, r.Status.Phase, describeTables(r))
			Expect(r.Spec.Window).NotTo(BeNil())
			Expect(r.Spec.Resume).To(Equal(i > 0), "run %s: only the runs after the first resume", r.Name)
			Expect(r.Status.Totals).NotTo(BeNil())
			Expect(r.Status.Tables).To(HaveLen(1))
			t := r.Status.Tables[0]
			Expect(t.ResumedFromBlock).To(HaveValue(Equal(reached)), "run %s resumes where the last window stopped", r.Name)
			if i < len(runs)-1 {
				Expect(r.Status.Phase).To(Equal(vacuumv1alpha1.RunInterrupted), "run %s: %s", r.Name, r.Status.Message)
				Expect(meta.IsStatusConditionTrue(r.Status.Conditions, vacuumv1alpha1.ConditionInterrupted)).To(BeTrue())
				Expect(meta.FindStatusCondition(r.Status.Conditions, vacuumv1alpha1.ConditionInterrupted).Reason).To(Equal(vacuumv1alpha1.ReasonWindowClosed))
				Expect(t.Complete).To(HaveValue(BeFalse()))
				Expect(t.BlockReached).To(HaveValue(BeNumerically(">", reached)), "run %s made progress", r.Name)
				Expect(t.DonePerMille).To(HaveValue(BeNumerically("<", 1000)))
				Expect(r.Status.CompletionTime.Time).To(BeTemporally("<=", r.Spec.Window.StopAt.Add(5*time.Second)),
					"run %s stopped within the grace", r.Name)
				reached = *t.BlockReached
			} else {
				Expect(r.Status.Phase).To(Equal(vacuumv1alpha1.RunSucceeded))
				Expect(t.Complete).To(HaveValue(BeTrue()))
				Expect(t.DonePerMille).To(HaveValue(Equal(int32(1000))))
			}
			removed += r.Status.Totals.TuplesRemoved
		}
		Expect(removed).To(Equal(ref.Status.Totals.TuplesRemoved), "the windows removed what one uninterrupted run removed")
		Expect(removed).To(Equal(dead["t"]))

		Eventually(func() *vacuumv1alpha1.PolicyWindowStatus {
			var p vacuumv1alpha1.VacuumPolicy
			Expect(cluster.Client.Get(suiteCtx, client.ObjectKeyFromObject(windowed), &p)).To(Succeed())
			return p.Status.Window
		}).WithTimeout(10*time.Second).Should(And(Not(BeNil()), HaveField("ObservedRun", runs[len(runs)-1].Name), HaveField("SpanningTables", BeEmpty())),
			"the policy counts the last run and no table spans windows any more")
		Expect(cluster.Client.Delete(suiteCtx, windowed)).To(Succeed()) // no further window
		for _, d := range []string{dir, refDir} {
			expectCheckClean(d)
			for _, s := range stats(d) {
				Expect(s.DeadTuples).To(BeZero(), "table %s of %s still has dead tuples", s.Name, d)
			}
		}
	})
})

// describeTables is a run's status.tables in one line.
func describeTables(r vacuumv1alpha1.VacuumRun) string {
	var b strings.Builder
	for _, t := range r.Status.Tables {
		fmt.Fprintf(&b, "%s complete=%v from=%d reached=%d done=%d‰ removed=%d; ", t.Name, ptr.Deref(t.Complete, false),
			ptr.Deref(t.ResumedFromBlock, -1), ptr.Deref(t.BlockReached, -1), ptr.Deref(t.DonePerMille, -1), t.TuplesRemoved)
	}
	return b.String()
}
