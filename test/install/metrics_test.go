package install

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
	"github.com/vacuumops/vacuum-operator/controllers"
	"github.com/vacuumops/vacuum-operator/internal/promtool"
)

// managerProcess is the built cmd/manager running against envtest as the installer.
type managerProcess struct {
	cmd         *exec.Cmd
	metricsAddr string
	done        chan struct{}
}

func freeAddr() string {
	GinkgoHelper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	defer func() { _ = l.Close() }()
	return l.Addr().String()
}

var managerBin string

// buildManager builds cmd/manager once for the suite.
func buildManager() string {
	GinkgoHelper()
	if managerBin == "" {
		dir, err := os.MkdirTemp("", "install-manager-")
		Expect(err).NotTo(HaveOccurred())
		managerBin = filepath.Join(dir, "manager")
		command(nil, "go", "build", "-o", managerBin, "./cmd/manager")
	}
	return managerBin
}

// startManager starts the manager with its metrics served as the chart serves them: HTTPS
// behind the authentication and authorization filter.
func startManager() *managerProcess {
	GinkgoHelper()
	m := &managerProcess{metricsAddr: freeAddr(), done: make(chan struct{})}
	probes := freeAddr()
	m.cmd = exec.Command(buildManager(), "--metrics-bind-address="+m.metricsAddr, "--health-probe-bind-address="+probes,
		"--namespace="+releaseNamespace, "--runner-image=registry.example/vacuum-operator:v1")
	m.cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	m.cmd.Stdout, m.cmd.Stderr = GinkgoWriter, GinkgoWriter
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	Expect(m.cmd.Start()).To(Succeed())
	go func() { _ = m.cmd.Wait(); close(m.done) }()
	Eventually(func() error {
		resp, err := http.Get("http://" + probes + "/readyz")
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("readyz: %s", resp.Status)
		}
		return nil
	}).WithTimeout(60*time.Second).WithPolling(200*time.Millisecond).Should(Succeed(), "the manager becomes ready")
	Eventually(func() error {
		c, err := net.Dial("tcp", m.metricsAddr)
		if err == nil {
			_ = c.Close()
		}
		return err
	}).WithTimeout(60*time.Second).WithPolling(200*time.Millisecond).Should(Succeed(), "the metrics server listens")
	return m
}

func (m *managerProcess) stop() {
	GinkgoHelper()
	select {
	case <-m.done:
		return
	default:
	}
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.done:
	case <-time.After(30 * time.Second):
		_ = syscall.Kill(-m.cmd.Process.Pid, syscall.SIGKILL)
		<-m.done
		Fail("the manager ignored SIGTERM")
	}
}

// scrape GETs the manager's /metrics with a bearer token ("" sends none).
func (m *managerProcess) scrape(token string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(suiteCtx, http.MethodGet, "https://"+m.metricsAddr+"/metrics", nil)
	if err != nil {
		return 0, nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	// The manager's certificate is self-signed, as a ServiceMonitor's insecureSkipVerify accepts.
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // self-signed, made at start
	}}
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}

// gaugeValue finds name{labels} in an exposition.
func gaugeValue(body []byte, name string, labels map[string]string) (float64, bool) {
	GinkgoHelper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(bytes.NewReader(body))
	Expect(err).NotTo(HaveOccurred())
	f, ok := families[name]
	if !ok {
		return 0, false
	}
	for _, m := range f.GetMetric() {
		if hasLabels(m, labels) {
			return m.GetGauge().GetValue(), true
		}
	}
	return 0, false
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	got := map[string]string{}
	for _, l := range m.GetLabel() {
		got[l.GetName()] = l.GetValue()
	}
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return len(got) == len(want)
}

// serviceAccountToken makes a service account in ns and returns a token of it.
func serviceAccountToken(ns, name string) string {
	GinkgoHelper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	Expect(client.IgnoreAlreadyExists(k8sClient.Create(suiteCtx, sa))).To(Succeed())
	cs, err := kubernetes.NewForConfig(cfg)
	Expect(err).NotTo(HaveOccurred())
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(suiteCtx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptrTo(int64(3600))},
	}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	return tr.Status.Token
}

func ptrTo[T any](v T) *T { return &v }

// describeMetrics adds the metrics specs to the ordered install container: they run after
// install.yaml is applied, with its CRDs and roles.
func describeMetrics() {
	var (
		mgr         *managerProcess
		readerToken string
		lastSuccess = time.Now().Add(-time.Hour).Truncate(time.Second)
	)
	const ns, ns2 = "team-metrics", "team-metrics-2"

	AfterAll(func() {
		if mgr != nil {
			mgr.stop()
		}
		if managerBin != "" {
			_ = os.RemoveAll(filepath.Dir(managerBin))
		}
	})

	It("serves /metrics only to a token whose user holds the metrics-reader role", func() {
		mgr = startManager()
		ensureNamespace("monitoring")
		readerToken = serviceAccountToken("monitoring", "prometheus")
		otherToken := serviceAccountToken("monitoring", "someone")
		crb := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "prometheus-reads-vacuum-operator"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "vacuum-operator-metrics-reader"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "monitoring", Name: "prometheus"}},
		}
		Expect(client.IgnoreAlreadyExists(k8sClient.Create(suiteCtx, crb))).To(Succeed())

		Eventually(func() (int, error) {
			code, _, err := mgr.scrape("")
			return code, err
		}).WithTimeout(30*time.Second).Should(Equal(http.StatusUnauthorized), "no token")
		code, _, err := mgr.scrape(otherToken)
		Expect(err).NotTo(HaveOccurred())
		Expect(code).To(Equal(http.StatusForbidden), "a service account without the metrics-reader role")
		Eventually(func() int {
			code, _, _ := mgr.scrape(readerToken)
			return code
		}).WithTimeout(20*time.Second).Should(Equal(http.StatusOK), "the metrics-reader role's holder")
	})

	It("labels per-policy series with the policy's namespace, and passes promtool check metrics", func() {
		for _, n := range []string{ns, ns2} {
			ensureNamespace(n)
			Expect(k8sClient.Create(suiteCtx, policy(n, "nightly"))).To(Succeed())
		}
		p := &vacuumv1alpha1.VacuumPolicy{}
		Expect(k8sClient.Get(suiteCtx, client.ObjectKey{Namespace: ns, Name: "nightly"}, p)).To(Succeed())
		base := p.DeepCopy()
		p.Status.LastSuccessfulTime = &metav1.Time{Time: lastSuccess}
		Expect(k8sClient.Status().Patch(suiteCtx, p, client.MergeFrom(base))).To(Succeed())
		// Only the policy's own reconcile writes its status, so a status write does not wake
		// it (controllers/predicates.go): an annotation does, as any metadata change would,
		// and its reconcile then reports the success the status holds.
		base = p.DeepCopy()
		p.Annotations = map[string]string{"e2e.vacuumops.io/wake": "1"}
		Expect(k8sClient.Patch(suiteCtx, p, client.MergeFrom(base))).To(Succeed())

		var body []byte
		Eventually(func() (float64, error) {
			code, b, err := mgr.scrape(readerToken)
			if err != nil || code != http.StatusOK {
				return 0, fmt.Errorf("scrape: %d %v", code, err)
			}
			body = b
			if _, found := gaugeValue(b, controllers.MetricPolicyCreated, map[string]string{"namespace": ns2, "policy": "nightly"}); !found {
				return 0, fmt.Errorf("%s/nightly not reconciled yet", ns2)
			}
			v, _ := gaugeValue(b, controllers.MetricLastSuccess, map[string]string{"namespace": ns, "policy": "nightly"})
			return v, nil
		}).WithTimeout(30*time.Second).Should(BeEquivalentTo(lastSuccess.Unix()), "last success from status")
		_, found := gaugeValue(body, controllers.MetricLastSuccess, map[string]string{"namespace": ns2, "policy": "nightly"})
		Expect(found).To(BeFalse(), "the namesake in %s never succeeded", ns2)
		for _, n := range []string{ns, ns2} {
			v, found := gaugeValue(body, controllers.MetricScheduleInterval, map[string]string{"namespace": n, "policy": "nightly"})
			Expect(found).To(BeTrue(), "schedule interval of %s/nightly", n)
			Expect(v).To(Equal(86400.0), "a daily schedule")
			_, found = gaugeValue(body, controllers.MetricActiveRuns, map[string]string{"namespace": n, "policy": "nightly"})
			Expect(found).To(BeTrue(), "active runs of %s/nightly", n)
		}
		promtool.CheckMetrics(GinkgoT(), body)
	})

	It("has the last-success gauge back after a manager restart, rebuilt from status", func() {
		mgr.stop()
		mgr = startManager()
		Eventually(func() (float64, error) {
			code, b, err := mgr.scrape(readerToken)
			if err != nil || code != http.StatusOK {
				return 0, fmt.Errorf("scrape: %d %v", code, err)
			}
			v, _ := gaugeValue(b, controllers.MetricLastSuccess, map[string]string{"namespace": ns, "policy": "nightly"})
			return v, nil
		}).WithTimeout(30*time.Second).Should(BeEquivalentTo(lastSuccess.Unix()), "no run ended under this manager")
	})

	describePrometheus(func() *managerProcess { return mgr }, func() string { return readerToken }, ns, "nightly")

	It("applies the ServiceMonitor, PodMonitor and PrometheusRule to the generated monitoring.coreos.com CRDs", func() {
		kubectl(nil, "apply", "--server-side", "-f", "hack/monitoring-crds")
		waitEstablished("crd/servicemonitors.monitoring.coreos.com",
			"crd/podmonitors.monitoring.coreos.com", "crd/prometheusrules.monitoring.coreos.com")
		kustomized := kubectl(nil, "kustomize", "config/prometheus")
		chart := helmTemplate("metrics.serviceMonitor.enabled=true", "metrics.podMonitor.enabled=true",
			"metrics.prometheusRule.enabled=true", "metrics.prometheusServiceAccount.name=prometheus",
			"metrics.prometheusServiceAccount.namespace=monitoring")
		var monitors []byte
		for _, o := range objects(chart) {
			if o.GroupVersionKind().Group != monitoringv1.SchemeGroupVersion.Group {
				continue
			}
			b, err := yaml.Marshal(o.Object)
			Expect(err).NotTo(HaveOccurred())
			monitors = append(append(monitors, "---\n"...), b...)
			if o.GetKind() == monitoringv1.ServiceMonitorsKind {
				var sm monitoringv1.ServiceMonitor
				Expect(yaml.UnmarshalStrict(b, &sm)).To(Succeed())
				Expect(sm.Spec.Endpoints).To(HaveLen(1))
				Expect(sm.Spec.Endpoints[0].HonorLabels).To(BeTrue(), "keeps the policy's namespace label")
			}
		}
		Expect(objects(monitors)).To(HaveLen(3), "the chart renders a ServiceMonitor, a PodMonitor and a PrometheusRule")
		kubectl(kustomized, "apply", "--server-side", "-f", "-")
		kubectl(monitors, "apply", "--server-side", "--force-conflicts", "-f", "-")
		kubectl(nil, "-n", releaseNamespace, "get", "servicemonitor/vacuum-operator-controller-manager-metrics-monitor",
			"podmonitor/vacuum-operator-runner-metrics-monitor", "prometheusrule/vacuum-operator-alerts")
	})
}
