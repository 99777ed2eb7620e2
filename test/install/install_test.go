package install

import (
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
)

// asUser is a client that impersonates a user of no group but system:authenticated.
func asUser(name string) client.Client {
	GinkgoHelper()
	c := rest.CopyConfig(cfg)
	c.Impersonate = rest.ImpersonationConfig{UserName: name}
	cl, err := client.New(c, client.Options{Scheme: clientgoscheme.Scheme})
	Expect(err).NotTo(HaveOccurred())
	return cl
}

// bindBuiltIn binds a user to a built-in ClusterRole (admin, edit, view) in a namespace, as a
// namespace owner's tooling does; no rule of the operator's is written by hand.
func bindBuiltIn(ns, user, role string) {
	GinkgoHelper()
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user + "-" + role},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	}
	Expect(client.IgnoreAlreadyExists(k8sClient.Create(suiteCtx, rb))).To(Succeed())
}

func ensureNamespace(name string) {
	GinkgoHelper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	Expect(client.IgnoreAlreadyExists(k8sClient.Create(suiteCtx, ns))).To(Succeed())
}

func policy(ns, name string) *vacuumv1alpha1.VacuumPolicy {
	return &vacuumv1alpha1.VacuumPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: vacuumv1alpha1.VacuumPolicySpec{
			Schedule: "0 3 * * *",
			Target:   vacuumv1alpha1.Target{PersistentVolumeClaim: "orders-data"},
		},
	}
}

// allowed asks the API server whether user may verb group/resource[/subresource] in ns.
func allowed(user, ns, verb, resource, subresource string) bool {
	GinkgoHelper()
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: user, Groups: []string{"system:authenticated"},
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: ns, Verb: verb, Group: vacuumv1alpha1.GroupVersion.Group, Resource: resource, Subresource: subresource,
		},
	}}
	Expect(k8sClient.Create(suiteCtx, sar)).To(Succeed())
	return sar.Status.Allowed
}

// expectUsersThroughAggregatedRoles checks, in a fresh namespace, what holders of the
// built-in roles may do with the operator's kinds once the chart or install.yaml is applied.
func expectUsersThroughAggregatedRoles(ns string) {
	GinkgoHelper()
	ensureNamespace(ns)
	bindBuiltIn(ns, "editor", "edit")
	bindBuiltIn(ns, "viewer", "view")
	bindBuiltIn(ns, "owner", "admin")
	editor := asUser("editor")

	By("a namespace editor creates a VacuumPolicy once the aggregation controller has filled edit")
	Eventually(func() error {
		return editor.Create(suiteCtx, policy(ns, "nightly"))
	}).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
	run := &vacuumv1alpha1.VacuumRun{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "by-hand"},
		Spec:       vacuumv1alpha1.VacuumRunSpec{Target: vacuumv1alpha1.Target{PersistentVolumeClaim: "orders-data"}},
	}
	Expect(editor.Create(suiteCtx, run)).To(Succeed(), "an editor creates a VacuumRun by hand")

	By("the editor may not write status: the operator trusts status.quiesced and status.tokenSecret")
	patched := run.DeepCopy()
	patched.Status.TokenSecret = &vacuumv1alpha1.OwnedObject{Name: "someone-elses-secret", UID: "1"}
	err := editor.Status().Patch(suiteCtx, patched, client.MergeFrom(run))
	Expect(apierrors.IsForbidden(err)).To(BeTrue(), "status patch by an editor: %v", err)
	p := policy(ns, "nightly")
	Expect(editor.Get(suiteCtx, client.ObjectKeyFromObject(p), p)).To(Succeed())
	pp := p.DeepCopy()
	pp.Status.LastScheduleTime = &metav1.Time{Time: time.Unix(1, 0)}
	err = editor.Status().Patch(suiteCtx, pp, client.MergeFrom(p))
	Expect(apierrors.IsForbidden(err)).To(BeTrue(), "policy status patch by an editor: %v", err)
	for _, user := range []string{"editor", "owner"} {
		for _, res := range []string{"vacuumruns", "vacuumpolicies"} {
			for _, verb := range []string{"update", "patch"} {
				Expect(allowed(user, ns, verb, res, "status")).To(BeFalse(), "%s may %s %s/status", user, verb, res)
			}
		}
	}
	Expect(allowed("owner", ns, "create", "vacuumpolicies", "")).To(BeTrue(), "a namespace admin creates policies")

	By("a viewer reads policies and may not create one")
	viewer := asUser("viewer")
	Expect(viewer.List(suiteCtx, &vacuumv1alpha1.VacuumPolicyList{}, client.InNamespace(ns))).To(Succeed())
	err = viewer.Create(suiteCtx, policy(ns, "by-viewer"))
	Expect(apierrors.IsForbidden(err)).To(BeTrue(), "create by a viewer: %v", err)

	By("nothing reaches another namespace")
	Expect(allowed("editor", "default", "create", "vacuumpolicies", "")).To(BeFalse())
}

var _ = Describe("Installing the operator", Ordered, func() {
	It("installs with helm: the CRDs and roles are served, and a namespace editor creates a VacuumPolicy", func() {
		command(nil, helmBin(), "install", "vacuum-operator", "dist/chart", "--namespace", releaseNamespace,
			"--create-namespace", "--set", "runner.allowedImages={registry.example/runner:1}", "--set", "metrics.networkPolicy.enabled=true")
		waitEstablished("crd/vacuumpolicies.vacuum.vacuumops.io", "crd/vacuumruns.vacuum.vacuumops.io")
		kubectl(nil, "-n", releaseNamespace, "get", "networkpolicy/vacuum-operator-allow-metrics-traffic")
		expectUsersThroughAggregatedRoles("team-helm")
	})

	It("keeps the CRDs and the users' policies on helm uninstall", func() {
		command(nil, helmBin(), "uninstall", "vacuum-operator", "--namespace", releaseNamespace, "--wait")
		Expect(k8sClient.Get(suiteCtx, client.ObjectKey{Namespace: "team-helm", Name: "nightly"},
			&vacuumv1alpha1.VacuumPolicy{})).To(Succeed(), "the policy outlives the release")
		Eventually(func() bool { return allowed("editor", "team-helm", "create", "vacuumpolicies", "") }).
			WithTimeout(30*time.Second).Should(BeFalse(), "the aggregated rules leave edit with the release")
	})

	It("applies make build-installer's dist/install.yaml, with the image it was given", func() {
		installer := filepath.Join(GinkgoT().TempDir(), "install.yaml")
		command(nil, "make", "-s", "build-installer", "INSTALLER="+installer, "IMG=registry.example/vacuum-operator:v1")
		manifest, err := os.ReadFile(installer)
		Expect(err).NotTo(HaveOccurred())
		objs := objects(manifest)
		dep := objs["Deployment/"+releaseNamespace+"/vacuum-operator-controller-manager"]
		Expect(dep).NotTo(BeNil(), "install.yaml has the manager's Deployment")
		containers, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers")
		Expect(containers[0]).To(HaveKeyWithValue("image", "registry.example/vacuum-operator:v1"))
		kubectl(manifest, "apply", "--server-side", "--force-conflicts", "-f", "-")
		waitEstablished("crd/vacuumpolicies.vacuum.vacuumops.io", "crd/vacuumruns.vacuum.vacuumops.io")
		expectUsersThroughAggregatedRoles("team-installer")
		kubectl(nil, "apply", "--server-side", "-k", "config/network-policy")
		kubectl(nil, "-n", releaseNamespace, "get", "networkpolicy/vacuum-operator-allow-metrics-traffic")
	})

	describeWaitRecipes() // before the metrics specs start a manager, which would reconcile its runs
	describeMetrics()
})
