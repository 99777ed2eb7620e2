package install

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
	"github.com/vacuumops/vacuum-operator/internal/promtool"
	"github.com/vacuumops/vacuum-operator/internal/runner"
)

// The dashboard against a real Prometheus (Debian's prometheus package): the server scrapes
// the manager's secure /metrics with a metrics-reader token, as the ServiceMonitor does, and
// a runner's metrics port during a run, with the labels the PodMonitor's relabelings give it,
// and every panel's expression must return data through Prometheus's HTTP API.

// promQueryResult is the part of /api/v1/query's answer the test reads.
type promQueryResult struct {
	Status string `json:"status"`
	Error  string `json:"error"`
	Data   struct {
		ResultType string            `json:"resultType"`
		Result     []json.RawMessage `json:"result"`
	} `json:"data"`
}

// prometheusServer is a Prometheus process with its own data directory.
type prometheusServer struct {
	cmd  *exec.Cmd
	addr string
	done chan struct{}
	out  bytes.Buffer
}

func startPrometheus(dir string, config []byte) *prometheusServer {
	GinkgoHelper()
	bin, err := promtool.ServerPath()
	Expect(err).NotTo(HaveOccurred())
	cfg := filepath.Join(dir, "prometheus.yml")
	Expect(os.WriteFile(cfg, config, 0o600)).To(Succeed())
	p := &prometheusServer{addr: freeAddr(), done: make(chan struct{})}
	p.cmd = exec.Command(bin, "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "tsdb"),
		"--web.listen-address="+p.addr, "--log.level=warn")
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	Expect(p.cmd.Start()).To(Succeed())
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	Eventually(func() error {
		resp, err := http.Get("http://" + p.addr + "/-/ready")
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("ready: %s", resp.Status)
		}
		return nil
	}).WithTimeout(30*time.Second).WithPolling(200*time.Millisecond).Should(Succeed(), "prometheus becomes ready: %s", &p.out)
	return p
}

func (p *prometheusServer) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

// get GETs a Prometheus API path and decodes its JSON answer.
func (p *prometheusServer) get(path string, q url.Values, v any) error {
	resp, err := http.Get("http://" + p.addr + path + "?" + q.Encode())
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	return json.NewDecoder(resp.Body).Decode(v)
}

// query evaluates an instant query and returns how many series or samples it answered.
func (p *prometheusServer) query(expr string) (int, error) {
	var r promQueryResult
	if err := p.get("/api/v1/query", url.Values{"query": {expr}}, &r); err != nil {
		return 0, err
	}
	if r.Status != "success" {
		return 0, fmt.Errorf("query %s: %s", expr, r.Error)
	}
	if r.Data.ResultType == "scalar" {
		return 1, nil
	}
	return len(r.Data.Result), nil
}

// targetsUp says whether every active target of the server was scraped healthy.
func (p *prometheusServer) targetsUp() error {
	var r struct {
		Data struct {
			ActiveTargets []struct {
				ScrapePool string `json:"scrapePool"`
				Health     string `json:"health"`
				LastError  string `json:"lastError"`
			} `json:"activeTargets"`
		} `json:"data"`
	}
	if err := p.get("/api/v1/targets", url.Values{"state": {"active"}}, &r); err != nil {
		return err
	}
	if len(r.Data.ActiveTargets) == 0 {
		return fmt.Errorf("no active target")
	}
	for _, t := range r.Data.ActiveTargets {
		if t.Health != "up" {
			return fmt.Errorf("target %s is %s: %s", t.ScrapePool, t.Health, t.LastError)
		}
	}
	return nil
}

// runnerProcess is vacuum-runner's `run` (in this process, as runner.Main) on a bloated data
// directory, throttled so it lasts while Prometheus scrapes it.
type runnerProcess struct {
	cancel      context.CancelFunc
	wg          sync.WaitGroup
	metricsAddr string
	args        []string
	stderr      bytes.Buffer
}

// prepareRunner makes the data directory the run will vacuum.
func prepareRunner(dir string) *runnerProcess {
	GinkgoHelper()
	data := filepath.Join(dir, "data")
	var out bytes.Buffer
	env := runner.Env{Stdout: &out, Stderr: &out}
	for _, args := range [][]string{
		{"init", "--data", data},
		{"bloat", "--data", data, "--table", "items", "--rows", "20000", "--indexes", "1", "--dead-fraction", "0.2", "--seed", "7"},
	} {
		Expect(runner.Main(suiteCtx, args, env)).To(Equal(0), "vacuum-runner %v: %s", args, &out)
	}
	return &runnerProcess{metricsAddr: freeAddr(), args: []string{"run", "--mode", "LAZY", "--data", data, "--listen", freeAddr(),
		"--metrics-listen", "", "--termination-log", filepath.Join(dir, "termination-log"),
		// ~200 cost units/s: the run lasts far longer than the test needs it (about 5 s
		// unthrottled at 20 units per 10 ms); stop cancels it.
		"--cost-delay", "10ms", "--cost-limit", "2"}}
}

// start runs the vacuum in the background until stop.
func (r *runnerProcess) start() {
	r.args[slices.Index(r.args, "--metrics-listen")+1] = r.metricsAddr
	ctx, cancel := context.WithCancel(suiteCtx)
	r.cancel = cancel
	r.wg.Add(1)
	go func() {
		defer GinkgoRecover()
		defer r.wg.Done()
		runner.Main(ctx, r.args, runner.Env{Stdout: GinkgoWriter, Stderr: &r.stderr})
	}()
}

func (r *runnerProcess) stop() {
	r.cancel()
	r.wg.Wait()
}

// scrapeConfig scrapes the manager as config/prometheus's ServiceMonitor does (HTTPS,
// honor_labels, a bearer token of the metrics-reader role, the self-signed certificate
// accepted) and the runner as its PodMonitor does, with the namespace, policy and run labels
// the PodMonitor's relabelings take from the runner pod.
func scrapeConfig(managerAddr, tokenFile, runnerAddr, ns, policy, run string) []byte {
	GinkgoHelper()
	cfg := map[string]any{
		"global": map[string]any{"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
		"scrape_configs": []any{
			map[string]any{
				"job_name": "vacuum-operator-manager", "scheme": "https", "honor_labels": true,
				"authorization":  map[string]any{"type": "Bearer", "credentials_file": tokenFile},
				"tls_config":     map[string]any{"insecure_skip_verify": true},
				"static_configs": []any{map[string]any{"targets": []string{managerAddr}}},
			},
			map[string]any{
				"job_name": "vacuum-runner",
				"static_configs": []any{map[string]any{"targets": []string{runnerAddr},
					"labels": map[string]string{"namespace": ns, "policy": policy, "run": run}}},
			},
		},
	}
	b, err := yaml.Marshal(cfg)
	Expect(err).NotTo(HaveOccurred())
	return b
}

// describePrometheus adds the real-Prometheus spec to the metrics specs: the manager (with
// the policy whose last success is set) and a reader token come from them.
func describePrometheus(manager func() *managerProcess, token func() string, ns, policy string) {
	It("answers every dashboard panel's query with data from a real Prometheus scraping the manager and a runner", func() {
		dir := GinkgoT().TempDir()
		tokenFile := filepath.Join(dir, "token")
		Expect(os.WriteFile(tokenFile, []byte(token()), 0o600)).To(Succeed())

		// A run of the policy that ends at once (its priority class is not allowed), so
		// vacuum_runs_total has a series.
		ended := &vacuumv1alpha1.VacuumRun{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "refused"}}
		ended.Spec.PolicyName = policy
		ended.Spec.Target.PersistentVolumeClaim = "data"
		ended.Spec.Runner.PriorityClassName = "not-allowed"
		Expect(k8sClient.Create(suiteCtx, ended)).To(Succeed())
		Eventually(func() (vacuumv1alpha1.RunPhase, error) {
			err := k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(ended), ended)
			return ended.Status.Phase, err
		}).WithTimeout(20 * time.Second).Should(Equal(vacuumv1alpha1.RunFailed))

		run := prepareRunner(dir)
		prom := startPrometheus(dir, scrapeConfig(manager().metricsAddr, tokenFile, run.metricsAddr, ns, policy, "nightly-1"))
		DeferCleanup(prom.stop)
		run.start()
		DeferCleanup(run.stop)
		Eventually(prom.targetsUp).WithTimeout(15*time.Second).WithPolling(500*time.Millisecond).Should(Succeed(),
			"both targets scraped; runner stderr: %s", &run.stderr)

		exprs := dashboardExprs()
		Expect(exprs).NotTo(BeEmpty())
		// rate() and increase() need two samples of a series: a few scrapes at 1 s.
		Eventually(func() []string {
			var empty []string
			for _, e := range exprs {
				if n, err := prom.query(e.expr); err != nil || n == 0 {
					empty = append(empty, fmt.Sprintf("%s: %s (%d series, %v)", e.panel, e.expr, n, err))
				}
			}
			return empty
		}).WithTimeout(20*time.Second).WithPolling(time.Second).Should(BeEmpty(), "every panel's query returns data")

		// The dashboard's namespace variable (label_values of the active-runs gauge) lists
		// the policy's namespace.
		var labels struct {
			Data []string `json:"data"`
		}
		Expect(prom.get("/api/v1/label/namespace/values", url.Values{"match[]": {"vacuum_policy_active_runs"}}, &labels)).To(Succeed())
		Expect(labels.Data).To(ContainElement(ns))
		// The runner's series are the run's, not an empty placeholder: it has scanned pages.
		n, err := prom.query(`vacuum_runner_heap_blocks_scanned_total{policy="` + policy + `"} > 0`)
		Expect(err).NotTo(HaveOccurred())
		Expect(n).To(Equal(1), "the runner has scanned pages")
	})
}

// panelExpr is one target expression of a dashboard panel, with Grafana's variables replaced.
type panelExpr struct{ panel, expr string }

func dashboardExprs() []panelExpr {
	GinkgoHelper()
	b, err := os.ReadFile(filepath.Join(repoRoot(), "config", "grafana", "vacuum-operator.json"))
	Expect(err).NotTo(HaveOccurred())
	var d dashboard
	Expect(json.Unmarshal(b, &d)).To(Succeed())
	var out []panelExpr
	for _, p := range d.Panels {
		for _, t := range p.Targets {
			out = append(out, panelExpr{p.Title + " " + t.RefID, grafanaVars.Replace(t.Expr)})
		}
	}
	return out
}
