package controllers

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
	"github.com/vacuumops/vacuum-operator/internal/runner/runnerwire"
)

// A VacuumPolicy or VacuumRun author gets no more than that: no image of their choosing, no
// Secret, pod or run of someone else's adopted, mounted or deleted, no replica count of
// their choosing written to a workload, and no quiesce of a workload they could not scale.

// asUser is a client that impersonates a user of no group but system:authenticated.
func asUser(name string) client.Client {
	c := rest.CopyConfig(cfg)
	c.Impersonate = rest.ImpersonationConfig{UserName: name}
	cl, err := client.New(c, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	return cl
}

// grant gives a user a Role of the namespace with rules.
func grant(ns, user string, rules ...rbacv1.PolicyRule) {
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user}, Rules: rules}
	Expect(k8sClient.Create(suiteCtx, role)).To(Succeed())
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: user},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	Expect(k8sClient.Create(suiteCtx, rb)).To(Succeed())
}

var vacuumAuthor = rbacv1.PolicyRule{APIGroups: []string{vacuumv1alpha1.GroupVersion.Group},
	Resources: []string{"vacuumpolicies", "vacuumruns"}, Verbs: []string{"get", "list", "create", "update", "patch", "delete"}}

func scaleRule(resource string, names ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{APIGroups: []string{"apps"}, Resources: []string{resource + "/scale"},
		Verbs: []string{"get", "update"}, ResourceNames: names}
}

func quiesceRun(ns, name, kind, workload string) *vacuumv1alpha1.VacuumRun {
	run := &vacuumv1alpha1.VacuumRun{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	run.Spec.Target.PersistentVolumeClaim = "data"
	run.Spec.Target.Quiesce = &vacuumv1alpha1.QuiesceTarget{Kind: kind, Name: workload}
	return run
}

var _ = Describe("Tenancy", func() {
	var (
		ns    string
		clock *clocktesting.FakeClock
		r     *RunReconciler
		rec   *recorder
	)
	BeforeEach(func() { ns, clock, r, rec = runSpecStart() })

	It("runs only the operator's image or one its admin allowed", func() {
		r.AllowedImages = []string{"registry.example/vacuum-runner:v2"}
		newRun(ns, "custom", "data", func(run *vacuumv1alpha1.VacuumRun) { run.Spec.Runner.Image = "evil.example/exfiltrate:1" })
		for range 3 {
			reconcileRun(r, ns, "custom")
		}
		run := getRun(ns, "custom")
		Expect(run.Status.Phase).To(Equal(vacuumv1alpha1.RunFailed))
		Expect(conditionReason(run.Status.Conditions, vacuumv1alpha1.ConditionFailed)).To(Equal(vacuumv1alpha1.ReasonImageNotAllowed))
		Expect(run.Status.Message).To(ContainSubstring("evil.example/exfiltrate:1"))
		Expect(podsOf(ns, "custom")).To(BeEmpty())

		newRun(ns, "allowed", "other", func(run *vacuumv1alpha1.VacuumRun) { run.Spec.Runner.Image = "registry.example/vacuum-runner:v2" })
		pod := reconcileUntilPod(r, ns, "allowed", 1)
		Expect(pod.Spec.Containers[0].Image).To(Equal("registry.example/vacuum-runner:v2"))
		newRun(ns, "default", "third", nil)
		Expect(reconcileUntilPod(r, ns, "default", 1).Spec.Containers[0].Image).To(Equal(r.RunnerImage))
	})

	It("never mounts or deletes a Secret named as the run's token used to be, and mounts its own by key", func() {
		victim := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gitlab-token"},
			StringData: map[string]string{"token": "glpat-secret", "password": "hunter2"}}
		Expect(k8sClient.Create(suiteCtx, victim)).To(Succeed())
		newRun(ns, "gitlab", "data", nil)
		pod := reconcileUntilPod(r, ns, "gitlab", 1)
		ref := getRun(ns, "gitlab").Status.TokenSecret
		Expect(ref.Name).NotTo(Equal("gitlab-token"))
		var vol *corev1.SecretVolumeSource
		for _, v := range pod.Spec.Volumes {
			if v.Secret != nil {
				vol = v.Secret
			}
		}
		Expect(vol).NotTo(BeNil())
		Expect(vol.SecretName).To(Equal(ref.Name))
		Expect(vol.Items).To(Equal([]corev1.KeyToPath{{Key: "token", Path: "token"},
			{Key: runnerwire.TLSCertKey, Path: runnerwire.TLSCertKey}, {Key: runnerwire.TLSKeyKey, Path: runnerwire.TLSKeyKey}}),
			"only the token and the control port's certificate and key are projected")

		Expect(k8sClient.Delete(suiteCtx, getRun(ns, "gitlab"))).To(Succeed())
		for range 3 {
			reconcileRun(r, ns, "gitlab")
		}
		Expect(apierrors.IsNotFound(k8sClient.Get(suiteCtx, key(ns, "gitlab"), &vacuumv1alpha1.VacuumRun{}))).To(BeTrue())
		var s corev1.Secret
		Expect(apierrors.IsNotFound(k8sClient.Get(suiteCtx, key(ns, ref.Name), &s))).To(BeTrue(), "its own token Secret is gone")
		Expect(k8sClient.Get(suiteCtx, key(ns, "gitlab-token"), &s)).To(Succeed(), "the other Secret is untouched")
		Expect(s.UID).To(Equal(victim.UID))
	})

	It("refuses a pod of its name that it does not control, with an event, and never deletes it", func() {
		newRun(ns, "squat", "data", nil)
		forged := testPod(ns, "squat-1", map[string]string{vacuumv1alpha1.LabelRun: "squat"})
		Expect(k8sClient.Create(suiteCtx, forged)).To(Succeed())
		for range 5 {
			reconcileRun(r, ns, "squat")
		}
		run := getRun(ns, "squat")
		Expect(run.Status.Phase).To(Equal(vacuumv1alpha1.RunFailed))
		Expect(conditionReason(run.Status.Conditions, vacuumv1alpha1.ConditionFailed)).To(Equal(vacuumv1alpha1.ReasonForeignObject))
		Expect(rec.reasons()).To(ContainElement(vacuumv1alpha1.ReasonForeignObject))
		Expect(getPod(ns, "squat-1").UID).To(Equal(forged.UID), "the foreign pod is left alone")
		Expect(leaseExists(ns, "data")).To(BeFalse())
	})

	It("deletes a pod or token Secret only while it is the one it read: a same-named replacement stays", func() {
		newRun(ns, "swapped", "data", nil)
		pod := reconcileUntilPod(r, ns, "swapped", 1)
		run := getRun(ns, "swapped")
		Expect(run.Status.TokenSecret).NotTo(BeNil())

		By("replacing both, between the manager's read and its delete, by objects of the same names")
		Expect(k8sClient.Delete(suiteCtx, pod)).To(Succeed())
		other := testPod(ns, pod.Name, map[string]string{"app": "web"})
		Expect(k8sClient.Create(suiteCtx, other)).To(Succeed())
		var secret corev1.Secret
		Expect(k8sClient.Get(suiteCtx, key(ns, run.Status.TokenSecret.Name), &secret)).To(Succeed())
		Expect(k8sClient.Delete(suiteCtx, &secret)).To(Succeed())
		otherSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: secret.Name},
			Data: map[string][]byte{"password": []byte("not the run's")}}
		Expect(k8sClient.Create(suiteCtx, otherSecret)).To(Succeed())

		Expect(deleteOwnedPod(suiteCtx, k8sClient, pod)).To(Succeed())
		Expect(deleteTokenSecret(suiteCtx, k8sClient, run)).To(Succeed())
		Expect(getPod(ns, pod.Name).UID).To(Equal(other.UID), "the new pod of that name is not deleted")
		Expect(k8sClient.Get(suiteCtx, key(ns, secret.Name), &secret)).To(Succeed())
		Expect(secret.UID).To(Equal(otherSecret.UID), "the new Secret of that name is not deleted")
	})

	It("does not wait for, read or delete a pod that only carries its label", func() {
		newRun(ns, "labelled", "data", nil)
		pod := reconcileUntilPod(r, ns, "labelled", 1)
		sticky := testPod(ns, "sticky", map[string]string{vacuumv1alpha1.LabelRun: "labelled"})
		sticky.Finalizers = []string{"example.com/never"}
		Expect(k8sClient.Create(suiteCtx, sticky)).To(Succeed())
		DeferCleanup(func() {
			p := getPod(ns, "sticky")
			p.Finalizers = nil
			Expect(k8sClient.Update(suiteCtx, p)).To(Succeed())
		})
		Expect(k8sClient.Patch(suiteCtx, getRun(ns, "labelled"), client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"cancel":true}}`)))).To(Succeed())
		for range 4 {
			reconcileRun(r, ns, "labelled")
		}
		Expect(getRun(ns, "labelled").Status.Phase).To(Equal(vacuumv1alpha1.RunCancelled))
		Expect(leaseExists(ns, "data")).To(BeFalse(), "the run's own pod stopped: the volume is free")
		Expect(apierrors.IsNotFound(k8sClient.Get(suiteCtx, key(ns, pod.Name), &corev1.Pod{}))).To(BeTrue())
		Expect(getPod(ns, "sticky").DeletionTimestamp).To(BeNil(), "the other pod is not deleted")
	})

	It("restores exactly the replicas it recorded itself, whatever annotation a user writes", func() {
		app := newWorkload(ns, "Deployment", "app", 3)
		newRun(ns, "forged", "data", func(run *vacuumv1alpha1.VacuumRun) {
			quiesceDeployment(run)
			run.Annotations = map[string]string{"vacuum.vacuumops.io/quiesce-replicas": "2147483647"}
		})
		pod := reconcileUntilPod(r, ns, "forged", 1)
		Expect(replicasOf(app)).To(BeZero())
		Expect(getRun(ns, "forged").Status.Quiesced).To(HaveValue(Equal(vacuumv1alpha1.QuiescedApp{Kind: "Deployment", Name: "app", Replicas: 3})))

		By("ignoring an annotation patched in mid-run")
		Expect(k8sClient.Patch(suiteCtx, getRun(ns, "forged"), client.RawPatch("application/merge-patch+json",
			[]byte(`{"metadata":{"annotations":{"vacuum.vacuumops.io/quiesce-replicas":"1000"}}}`)))).To(Succeed())
		setPodTerminated(pod, 0, "Completed", string(goldenBytes("summary-succeeded.json")))
		for range 3 {
			reconcileRun(r, ns, "forged")
		}
		Expect(getRun(ns, "forged").Status.Phase).To(Equal(vacuumv1alpha1.RunSucceeded))
		Expect(replicasOf(app)).To(BeEquivalentTo(3))
		Expect(getRun(ns, "forged").Status.Quiesced).To(BeNil())
	})

	It("never lowers a workload someone scaled up between the run's end and its restore", func() {
		app := newWorkload(ns, "Deployment", "app", 3)
		newRun(ns, "raised", "data", quiesceDeployment)
		pod := reconcileUntilPod(r, ns, "raised", 1)
		Expect(replicasOf(app)).To(BeZero())
		setPodTerminated(pod, 0, "Completed", string(goldenBytes("summary-succeeded.json")))
		reconcileRun(r, ns, "raised")
		run := getRun(ns, "raised")
		Expect(run.Status.Phase).To(Equal(vacuumv1alpha1.RunSucceeded))
		Expect(run.Status.Quiesced).NotTo(BeNil(), "not restored yet: the next reconcile restores")

		var scale autoscalingv1.Scale
		Expect(k8sClient.SubResource("scale").Get(suiteCtx, app, &scale)).To(Succeed())
		scale.Spec.Replicas = 5
		Expect(k8sClient.SubResource("scale").Update(suiteCtx, app, client.WithSubResourceBody(&scale))).To(Succeed())
		for range 2 {
			reconcileRun(r, ns, "raised")
		}
		Expect(replicasOf(app)).To(BeEquivalentTo(5), "the restore only raises a count, up to the one it recorded")
		Expect(getRun(ns, "raised").Status.Quiesced).To(BeNil())
	})

	It("lets a policy adopt only runs it controls: a hand-made run of its run's name is left alone", func() {
		pr, prec := newPolicyReconciler(clock)
		stranger := &vacuumv1alpha1.VacuumRun{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nightly-once",
			Labels: map[string]string{vacuumv1alpha1.LabelPolicy: "nightly"}}}
		stranger.Spec.Target.PersistentVolumeClaim = "data"
		stranger.Spec.PolicyName = "nightly"
		Expect(k8sClient.Create(suiteCtx, stranger)).To(Succeed())
		endRun(ns, "nightly-once", vacuumv1alpha1.RunFailed, vacuumv1alpha1.ReasonBadInput, clock.Now())
		newPolicy(ns, "nightly", func(p *vacuumv1alpha1.VacuumPolicy) {
			p.Spec.FailedRunsHistoryLimit = ptr.To(int32(0))
		})
		reconcilePolicy(pr, ns, "nightly")
		reconcilePolicy(pr, ns, "nightly")
		Expect(prec.reasons()).To(ContainElement(vacuumv1alpha1.ReasonForeignObject))
		p := getPolicy(ns, "nightly")
		Expect(p.Status.Active).To(BeEmpty(), "the stranger is not the policy's active run")
		Expect(getRun(ns, "nightly-once").UID).To(Equal(stranger.UID), "nor pruned as its history")
	})
})

var _ = Describe("VacuumRun spec immutability", func() {
	var ns string
	BeforeEach(func() { ns = newNamespace() })

	DescribeTable("refuses a change of a field other than throttle and cancel, naming it",
		func(field, patch string) {
			run := newRun(ns, "fixed", "data", func(run *vacuumv1alpha1.VacuumRun) {
				run.Spec.Target.SubPath = "pg"
				run.Spec.Target.Tables = []string{"orders"}
				run.Spec.Target.Quiesce = &vacuumv1alpha1.QuiesceTarget{Kind: "Deployment", Name: "app"}
				run.Spec.ActiveDeadlineSeconds = ptr.To(int64(3600))
				run.Spec.PolicyName = "nightly"
			})
			err := k8sClient.Patch(suiteCtx, run, client.RawPatch("application/merge-patch+json", []byte(patch)))
			Expect(err).To(HaveOccurred(), "patch %s", patch)
			Expect(err.Error()).To(ContainSubstring(fmt.Sprintf("spec.%s is immutable", field)))
		},
		Entry(nil, "target.subPath", `{"spec":{"target":{"subPath":"other"}}}`),
		Entry(nil, "target.subPath", `{"spec":{"target":{"subPath":null}}}`),
		Entry(nil, "target.tables", `{"spec":{"target":{"tables":["users"]}}}`),
		Entry(nil, "target.quiesce", `{"spec":{"target":{"quiesce":{"kind":"Deployment","name":"other"}}}}`),
		Entry(nil, "target.quiesce", `{"spec":{"target":{"quiesce":null}}}`),
		Entry(nil, "mode", `{"spec":{"mode":"Full"}}`),
		Entry(nil, "ringSize", `{"spec":{"ringSize":"4Mi"}}`),
		Entry(nil, "bufferPoolSize", `{"spec":{"bufferPoolSize":"256Mi"}}`),
		Entry(nil, "parallelism", `{"spec":{"parallelism":2}}`),
		Entry(nil, "indexWorkers", `{"spec":{"indexWorkers":2}}`),
		Entry(nil, "maintenanceWorkMem", `{"spec":{"maintenanceWorkMem":"128Mi"}}`),
		Entry(nil, "truncate", `{"spec":{"truncate":false}}`),
		Entry(nil, "minDeadTuplePercent", `{"spec":{"minDeadTuplePercent":5}}`),
		Entry(nil, "tableOverrides", `{"spec":{"tableOverrides":[{"table":"orders","throttle":{"costLimit":5}}]}}`),
		Entry(nil, "runner", `{"spec":{"runner":{"nodeSelector":{"disk":"ssd"}}}}`),
		Entry(nil, "activeDeadlineSeconds", `{"spec":{"activeDeadlineSeconds":60}}`),
		Entry(nil, "backoffLimit", `{"spec":{"backoffLimit":0}}`),
		Entry(nil, "podStartTimeoutSeconds", `{"spec":{"podStartTimeoutSeconds":60}}`),
		Entry(nil, "allowCrashRecovery", `{"spec":{"allowCrashRecovery":true}}`),
		Entry(nil, "policyName", `{"spec":{"policyName":"other"}}`),
	)

	It("accepts a throttle change and a cancel, and refuses an un-cancel", func() {
		run := newRun(ns, "tuned", "data", nil)
		Expect(k8sClient.Patch(suiteCtx, run, client.RawPatch("application/merge-patch+json",
			[]byte(`{"spec":{"throttle":{"costLimit":50,"maxReadBytesPerSecond":"10Mi"}}}`)))).To(Succeed())
		Expect(k8sClient.Patch(suiteCtx, run, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"cancel":true}}`)))).To(Succeed())
		err := k8sClient.Patch(suiteCtx, run, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"cancel":false}}`)))
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("spec.cancel can only change from false to true"))
	})

	It("leaves a VacuumPolicy's spec editable", func() {
		p := newPolicy(ns, "editable", nil)
		Expect(k8sClient.Patch(suiteCtx, p, client.RawPatch("application/merge-patch+json",
			[]byte(`{"spec":{"mode":"Full","parallelism":2,"target":{"quiesce":{"kind":"Deployment","name":"app"}}}}`)))).To(Succeed())
	})
})

var _ = Describe("The quiesce admission policy (config/admission)", func() {
	It("lets only users who may update a workload's scale name it in target.quiesce", func() {
		ns := newNamespace()
		grant(ns, "alice", vacuumAuthor)                                          // may write vacuum objects only
		grant(ns, "bob", vacuumAuthor, scaleRule("deployments"))                  // may also scale every Deployment
		grant(ns, "carol", vacuumAuthor, scaleRule("statefulsets", "cache-only")) // may scale one StatefulSet
		alice, bob, carol := asUser("alice"), asUser("bob"), asUser("carol")

		By("refusing alice's run, with a message naming target.quiesce (the policy may take a moment to load)")
		Eventually(func() string {
			err := alice.Create(suiteCtx, quiesceRun(ns, "by-alice", "Deployment", "orders-db"))
			if err == nil {
				Expect(k8sClient.Delete(suiteCtx, quiesceRun(ns, "by-alice", "", ""))).To(Succeed())
				return "admitted"
			}
			return err.Error()
		}).WithTimeout(20 * time.Second).WithPolling(200 * time.Millisecond).Should(And(
			ContainSubstring("target.quiesce"), ContainSubstring("alice may not update the scale of Deployment orders-db")))

		By("refusing her policy too, and admitting what quiesces nothing")
		p := &vacuumv1alpha1.VacuumPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "by-alice"}}
		p.Spec.Target.PersistentVolumeClaim = "data"
		Expect(alice.Create(suiteCtx, p)).To(Succeed())
		err := alice.Patch(suiteCtx, p, client.RawPatch("application/merge-patch+json",
			[]byte(`{"spec":{"target":{"quiesce":{"kind":"Deployment","name":"orders-db"}}}}`)))
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("target.quiesce"))
		plain := quiesceRun(ns, "plain", "", "")
		plain.Spec.Target.Quiesce = nil
		Expect(alice.Create(suiteCtx, plain)).To(Succeed())

		By("admitting bob, who may scale it himself, and alice's throttle edit of his run")
		bobs := quiesceRun(ns, "by-bob", "Deployment", "orders-db")
		Expect(bob.Create(suiteCtx, bobs)).To(Succeed())
		Expect(alice.Patch(suiteCtx, bobs, client.RawPatch("application/merge-patch+json",
			[]byte(`{"spec":{"throttle":{"costLimit":10}}}`)))).To(Succeed())
		Expect(bob.Create(suiteCtx, quiesceRun(ns, "bob-sts", "StatefulSet", "cache-only"))).NotTo(Succeed(),
			"bob's grant covers Deployments, not StatefulSets")

		By("checking the workload's name: carol may scale cache-only and nothing else")
		Expect(carol.Create(suiteCtx, quiesceRun(ns, "by-carol", "StatefulSet", "cache-only"))).To(Succeed())
		err = carol.Create(suiteCtx, quiesceRun(ns, "carol-db", "StatefulSet", "orders-db"))
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("target.quiesce"))
	})
})
