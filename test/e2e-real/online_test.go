package e2ereal

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
	"github.com/vacuumops/vacuum-operator/internal/load"
)

// sampleWithLaneImage is a file of config/samples with its image set to the lane's imported
// one, never pulled.
func sampleWithLaneImage(name string) []byte {
	GinkgoHelper()
	b, err := os.ReadFile(filepath.Join("..", "..", "config", "samples", name))
	Expect(err).NotTo(HaveOccurred())
	s := strings.ReplaceAll(string(b), "image: vacuum-operator:dev", "image: "+env.image)
	return []byte(strings.ReplaceAll(s, "imagePullPolicy: IfNotPresent", "imagePullPolicy: Never"))
}

var _ = Describe("An online run on the real cluster", func() {
	It("vacuums the engine-server StatefulSet sample beside the load generator sample, which reaches it by its ClusterIP through kube-proxy", func(ctx SpecContext) {
		ns := newNamespace(ctx, "e2e-real-online")
		By("a local PV for the StatefulSet's claim data-shop-db-0, owned by the server's user")
		bindEmptyLocalVolume(ctx, ns, "data-shop-db-0")

		By("applying the engine-server and load generator samples with kubectl")
		env.kubectlRun(ctx, sampleWithLaneImage("engine_server.yaml"), "apply", "-n", ns, "-f", "-")
		env.kubectlRun(ctx, nil, "-n", ns, "rollout", "status", "statefulset/shop-db", "--timeout=180s")
		env.kubectlRun(ctx, sampleWithLaneImage("load_generator.yaml"), "apply", "-n", ns, "-f", "-")
		env.kubectlRun(ctx, nil, "-n", ns, "rollout", "status", "deployment/shop-load", "--timeout=180s")
		var svc corev1.Service
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "shop-db"}, &svc)).To(Succeed())
		Expect(svc.Spec.ClusterIP).NotTo(BeEmpty())
		loadPods := &corev1.PodList{}
		Expect(k8sClient.List(ctx, loadPods, client.InNamespace(ns), client.MatchingLabels{"app.kubernetes.io/name": "shop-load"})).To(Succeed())
		Expect(loadPods.Items).To(HaveLen(1))
		Expect(loadPods.Items[0].Spec.HostNetwork).To(BeFalse(), "the load reaches the server through the Service, not the host")
		// The load's interval reports (every 10 s) say it runs against the server it found
		// through SHOP_DB_SERVICE_HOST, the Service's ClusterIP.
		loadReport := func(g Gomega) load.Report {
			out, err := tryRun(ctx, nil, env.kubectl, "--kubeconfig", env.kubeconfig, "-n", ns, "logs", "deployment/shop-load")
			g.Expect(err).NotTo(HaveOccurred())
			var last *load.Report
			sc := bufio.NewScanner(strings.NewReader(out))
			for sc.Scan() {
				var r load.Report
				if json.Unmarshal(sc.Bytes(), &r) == nil && r.Total.Statements > 0 {
					last = &r
				}
			}
			g.Expect(last).NotTo(BeNil(), "no report with statements in the load's log:\n%s", out)
			return *last
		}
		Eventually(func(g Gomega) int64 { return loadReport(g).Total.Statements }).WithContext(ctx).
			WithTimeout(2*time.Minute).WithPolling(2*time.Second).Should(BeNumerically(">", 100), "the load runs through the ClusterIP")

		By("an online VacuumRun of the table orders through the operator, in a real runner container")
		// 1 cost unit per 20 ms: the table's few hundred pages take tens of seconds, several
		// of the operator's progress reads (at 1,000 units/s the run took 1.3 s and ended
		// before any read carried the foreground).
		limit := int32(1)
		run := &vacuumv1alpha1.VacuumRun{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "online"}}
		run.Spec.Target.Server = &vacuumv1alpha1.ServerTarget{Service: "shop-db", Database: "shop",
			CredentialsSecret: vacuumv1alpha1.CredentialsSecret{Name: "shop-db-vacuum"},
			TLS:               &vacuumv1alpha1.ServerTLS{Mode: vacuumv1alpha1.TLSDisable}}
		run.Spec.Target.Tables = []string{"orders"}
		run.Spec.Throttle = vacuumv1alpha1.Throttle{CostDelay: &metav1.Duration{Duration: 20 * time.Millisecond}, CostLimit: &limit}
		Expect(k8sClient.Create(ctx, run)).To(Succeed())
		var sawForeground bool
		Eventually(func(g Gomega) vacuumv1alpha1.RunPhase {
			r := getRun(ctx, ns, run.Name)
			sawForeground = sawForeground || r.Status.Foreground != nil && r.Status.Foreground.P99 != ""
			return r.Status.Phase
		}).WithContext(ctx).WithTimeout(4 * time.Minute).WithPolling(time.Second).Should(Equal(vacuumv1alpha1.RunSucceeded))
		done := getRun(ctx, ns, run.Name)
		GinkgoWriter.Printf("online run: %s; totals %+v; foreground %+v\n", done.Status.Message, done.Status.Totals, done.Status.Foreground)
		Expect(done.Status.Totals).NotTo(BeNil())
		Expect(done.Status.Totals.PagesScanned).To(BeNumerically(">", 0))
		Expect(done.Status.Totals.TuplesRemoved).To(BeNumerically(">", 0), "the load's updates left dead tuples for the run")
		Expect(sawForeground || done.Status.Foreground != nil && done.Status.Foreground.P99 != "").To(BeTrue(),
			"the server's foreground latency in status during the run")
		rep := loadReport(Default)
		Expect(rep.Total.Failed).To(BeZero(), "failed foreground statements: %s", rep.LastError)
	})
})
