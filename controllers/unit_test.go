package controllers

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
	"github.com/vacuumops/vacuum-operator/internal/runner/runnerwire"
)

// goldenDir holds the runner's golden JSON: the operator's tests use it, never a shape of
// their own.
var goldenDir = filepath.Join("..", "internal", "runner", "runnerwire", "testdata")

// fataler is what readGolden needs of a *testing.T or GinkgoT().
type fataler interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

func readGolden[T any](t fataler, name string) T {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(goldenDir, name))
	if err != nil {
		t.Fatal(err)
	}
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("golden %s: %v", name, err)
	}
	return v
}

// defaultedRun is a run as the API server stores it after defaulting.
func defaultedRun() *vacuumv1alpha1.VacuumRun {
	q := func(s string) *resource.Quantity { v := resource.MustParse(s); return &v }
	run := &vacuumv1alpha1.VacuumRun{ObjectMeta: metav1.ObjectMeta{Name: "orders-lazy-once", Namespace: "db", UID: "uid-1"}}
	s := &run.Spec.VacuumSpec
	s.Target.PersistentVolumeClaim = "orders-data"
	s.Mode = vacuumv1alpha1.VacuumModeLazy
	s.Throttle = vacuumv1alpha1.Throttle{CostDelay: &metav1.Duration{Duration: 2 * time.Millisecond},
		CostLimit: ptr.To(int32(200)), PageHitCost: ptr.To(int32(1)), PageMissCost: ptr.To(int32(2)), PageDirtyCost: ptr.To(int32(20))}
	s.RingSize, s.BufferPoolSize, s.MaintenanceWorkMem = q("2Mi"), q("128Mi"), q("64Mi")
	s.Parallelism, s.Truncate, s.BackoffLimit = 2, ptr.To(true), 2
	return run
}

func podFor(t *testing.T, run *vacuumv1alpha1.VacuumRun) *corev1.Pod {
	t.Helper()
	_, res, specJSON, err := resolvedSpec(&run.Spec.VacuumSpec, string(run.UID))
	if err != nil {
		t.Fatal(err)
	}
	r := &RunReconciler{RunnerImage: "vacuum-operator:test"}
	return r.runnerPod(run, 1, specJSON, res)
}

func TestRunnerPodPassesTheRestrictedProfile(t *testing.T) {
	run := defaultedRun()
	run.Spec.Runner.PodSecurityContext = &vacuumv1alpha1.RunnerPodSecurityContext{
		RunAsUser: ptr.To(int64(1000)), RunAsGroup: ptr.To(int64(1000)), FSGroup: ptr.To(int64(2000)),
	}
	pod := podFor(t, run)
	if err := checkRunnerPodSecurity(pod); err != nil {
		t.Fatalf("runner pod refused: %v", err)
	}
	if pod.Spec.SecurityContext.RunAsUser == nil || *pod.Spec.SecurityContext.RunAsUser != 1000 {
		t.Errorf("the user's runAsUser was not applied")
	}
}

func TestPodSecurityCheckRefusesWhatTheProfileForbidsAndWhatItDoesNotCheck(t *testing.T) {
	cases := map[string]func(*corev1.Pod){
		"privilege escalation": func(p *corev1.Pod) { p.Spec.Containers[0].SecurityContext.AllowPrivilegeEscalation = ptr.To(true) },
		"a capability kept":    func(p *corev1.Pod) { p.Spec.Containers[0].SecurityContext.Capabilities.Drop = nil },
		"root user":            func(p *corev1.Pod) { p.Spec.SecurityContext.RunAsUser = ptr.To(int64(0)) },
		"no seccomp profile": func(p *corev1.Pod) {
			p.Spec.SecurityContext.SeccompProfile = nil
			p.Spec.Containers[0].SecurityContext.SeccompProfile = nil
		},
		"writable root filesystem": func(p *corev1.Pod) { p.Spec.Containers[0].SecurityContext.ReadOnlyRootFilesystem = ptr.To(false) },
		"service-account token":    func(p *corev1.Pod) { p.Spec.AutomountServiceAccountToken = nil },
		"a host path volume mounted": func(p *corev1.Pod) {
			p.Spec.Volumes[0].VolumeSource = corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}
		},
	}
	for name, breakIt := range cases {
		t.Run(name, func(t *testing.T) {
			pod := podFor(t, defaultedRun())
			breakIt(pod)
			if err := checkRunnerPodSecurity(pod); err == nil {
				t.Fatal("check accepted the pod")
			}
		})
	}
}

func TestRunnerPodArgsAreTheRunnerFlagContract(t *testing.T) {
	run := defaultedRun()
	run.Spec.Target.Tables = []string{"price$$", "$(POD_IP)"}
	pod := podFor(t, run)
	c := pod.Spec.Containers[0]
	want := []string{"run", "--spec-file", specFilePath, "--listen=[$(POD_IP)]:8443", "--metrics-listen=[$(POD_IP)]:9090",
		"--tls-cert-file", tokenMountDir + "/tls.crt", "--tls-key-file", tokenMountDir + "/tls.key",
		"--termination-log", "/dev/termination-log", "--control-token-file", tokenFilePath, "--lock-timeout", "2m"}
	if strings.Join(c.Args, " ") != strings.Join(want, " ") {
		t.Errorf("args = %q, want %q", c.Args, want)
	}
	// The spec reaches the runner as a file holding the pod's annotation, verbatim: no $
	// in it is ever seen by the kubelet's expansion of args.
	var spec runnerwire.RunSpec
	if err := json.Unmarshal([]byte(pod.Annotations[vacuumv1alpha1.AnnotationRunSpec]), &spec); err != nil {
		t.Fatalf("the run-spec annotation is not a RunSpec: %v", err)
	}
	if _, err := spec.Resolve(); err != nil || spec.DataDir != runnerwire.DefaultDataDir || *spec.Parallelism != 2 ||
		strings.Join(spec.Tables, ",") != "price$$,$(POD_IP)" {
		t.Errorf("spec %+v: %v", spec, err)
	}
	var file *corev1.DownwardAPIVolumeFile
	for _, v := range pod.Spec.Volumes {
		if v.DownwardAPI != nil && len(v.DownwardAPI.Items) == 1 {
			file = &v.DownwardAPI.Items[0]
		}
	}
	if file == nil || file.FieldRef.FieldPath != "metadata.annotations['"+vacuumv1alpha1.AnnotationRunSpec+"']" ||
		specMountDir+"/"+file.Path != specFilePath {
		t.Errorf("no downward-API volume puts the annotation at %s: %+v", specFilePath, file)
	}
	if c.Env[0].Name != "POD_IP" || c.Env[0].ValueFrom.FieldRef.FieldPath != "status.podIP" {
		t.Errorf("POD_IP must come from the downward API: %+v", c.Env)
	}
	for _, a := range c.Args {
		if strings.Contains(a, runToken(nil, "uid-1")[:16]) {
			t.Errorf("an arg carries the token: %q", a)
		}
	}
	if pod.Spec.RestartPolicy != corev1.RestartPolicyNever || pod.Name != "orders-lazy-once-1" {
		t.Errorf("restartPolicy %s, name %s", pod.Spec.RestartPolicy, pod.Name)
	}
}

func TestRunnerMemoryDefaultsToPoolPlusWorkersTimesWorkMemPlusOverhead(t *testing.T) {
	pod := podFor(t, defaultedRun()) // 128Mi + 2 x 64Mi + 64Mi
	res := pod.Spec.Containers[0].Resources
	want := resource.MustParse("320Mi")
	if res.Limits.Memory().Cmp(want) != 0 || res.Requests.Memory().Cmp(want) != 0 {
		t.Errorf("memory request %s limit %s, want %s", res.Requests.Memory(), res.Limits.Memory(), &want)
	}
	run := defaultedRun()
	run.Spec.Runner.Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}
	res = podFor(t, run).Spec.Containers[0].Resources
	if res.Limits.Memory().Cmp(resource.MustParse("1Gi")) != 0 {
		t.Errorf("a user's request above the default must raise the limit with it, got %s", res.Limits.Memory())
	}
}

func TestExitCodesDecideTheRunOutcome(t *testing.T) {
	cases := []struct {
		name       string
		end        attemptEnd
		cancelling bool
		want       verdict
		reason     string
	}{
		{"0 succeeds", attemptEnd{ExitCode: 0}, false, verdictSucceeded, vacuumv1alpha1.ReasonSucceeded},
		{"1 retries", attemptEnd{ExitCode: 1}, false, verdictRetry, vacuumv1alpha1.ReasonAttemptFailed},
		{"2 fails", attemptEnd{ExitCode: 2}, false, verdictFailed, vacuumv1alpha1.ReasonBadInput},
		{"3 retries", attemptEnd{ExitCode: 3}, false, verdictRetry, vacuumv1alpha1.ReasonAttemptFailed},
		{"4 fails with corruption", attemptEnd{ExitCode: 4}, false, verdictFailed, vacuumv1alpha1.ReasonCorruptionFound},
		{"5 cancelled when cancelling", attemptEnd{ExitCode: 5}, true, verdictCancelled, vacuumv1alpha1.ReasonCancelled},
		{"5 retries otherwise", attemptEnd{ExitCode: 5}, false, verdictRetry, vacuumv1alpha1.ReasonAttemptFailed},
		{"6 fails", attemptEnd{ExitCode: 6}, false, verdictFailed, vacuumv1alpha1.ReasonNoSpace},
		{"SIGKILL retries", attemptEnd{ExitCode: 137}, false, verdictRetry, vacuumv1alpha1.ReasonAttemptFailed},
		{"OOM retries", attemptEnd{ExitCode: 137, Reason: "OOMKilled"}, false, verdictRetry, vacuumv1alpha1.ReasonAttemptFailed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v, reason, msg := judge(c.end, c.cancelling)
			if v != c.want || reason != c.reason || msg == "" {
				t.Errorf("judge = %v %s %q, want %v %s", v, reason, msg, c.want, c.reason)
			}
		})
	}
}

func TestProgressAndSummaryFoldIntoStatus(t *testing.T) {
	var st vacuumv1alpha1.VacuumRunStatus
	p := readGolden[runnerwire.Progress](t, "progress.json")
	foldProgress(&st, &p)
	if st.Totals.PagesScanned != p.PagesScanned || st.Table != p.Table || st.VacuumPhase != string(p.Phase) || st.Totals.TuplesRemoved != p.TuplesRemoved || len(st.Tables) != len(p.Tables) {
		t.Fatalf("status after progress: %+v", st)
	}
	if st.ReadRate != vacuumv1alpha1.FormatBytesPerSecond(int64(p.ReadBytesPerSecond)) || st.Progress == "" {
		t.Errorf("human rates missing: %q %q", st.ReadRate, st.Progress)
	}
	sum := readGolden[runnerwire.Summary](t, "summary-succeeded.json")
	foldSummary(&st, &sum)
	if st.Totals.TuplesRemoved != sum.Totals.TuplesRemoved || st.Totals.PagesRemoved != sum.Totals.PagesRemoved || st.Percent != 100 {
		t.Errorf("totals after summary: %+v", st.Totals)
	}
	for _, ts := range st.Tables {
		if ts.Phase != string(runnerwire.PhaseDone) || ts.PagesScanned == 0 {
			t.Errorf("table %s not completed by the summary: %+v", ts.Name, ts)
		}
	}
}

func TestASummarysReplicationLagReachesStatusEvenWithoutAProgressRead(t *testing.T) {
	var st vacuumv1alpha1.VacuumRunStatus
	sum := readGolden[runnerwire.Summary](t, "summary-succeeded.json")
	foldSummary(&st, &sum)
	if st.Replication != nil {
		t.Fatalf("replication %+v from a summary without one", st.Replication)
	}
	sum.Replication = &runnerwire.Replication{Standbys: 1, LagBytes: 4096, LagSeconds: 0.071, MaxLagBytes: 7800, MaxLagSeconds: 0.075}
	foldSummary(&st, &sum)
	if r := st.Replication; r == nil || r.Standbys != 1 || r.LagBytes != 4096 || r.MaxLagBytes != 7800 || r.MaxReplayLag == "" {
		t.Fatalf("status.replication %+v, want the summary's standby and lag", r)
	}
	sum.Replication = nil
	foldSummary(&st, &sum)
	if st.Replication == nil || st.Replication.MaxLagBytes != 7800 {
		t.Errorf("a summary without replication dropped the lag already in status: %+v", st.Replication)
	}
}

func TestASummarysForegroundReachesStatusEvenWithoutAProgressRead(t *testing.T) {
	var st vacuumv1alpha1.VacuumRunStatus
	sum := readGolden[runnerwire.Summary](t, "summary-succeeded.json")
	foldSummary(&st, &sum)
	if st.Foreground != nil {
		t.Fatalf("foreground %+v from a summary without one", st.Foreground)
	}
	sum.Foreground = &runnerwire.Foreground{WindowSeconds: 10, Statements: 1950, StatementsPerSecond: 195, P50Microseconds: 180, P99Microseconds: 2600}
	sum.ForegroundBaseline = &runnerwire.Foreground{WindowSeconds: 10, Statements: 2000, StatementsPerSecond: 200, P50Microseconds: 170, P99Microseconds: 2000}
	foldSummary(&st, &sum)
	f := st.Foreground
	if f == nil || f.P99 != "2.6ms" || f.BaselineP99 != "2ms" || f.StatementsPerSecond != 195 || f.P99VsBaseline != "1.3x" {
		t.Fatalf("status.foreground %+v, want the summary's p99 2.6ms at 195/s against a 2ms baseline (1.3x)", f)
	}
	sum.Foreground, sum.ForegroundBaseline = nil, nil
	foldSummary(&st, &sum)
	if st.Foreground == nil || st.Foreground.P99 != "2.6ms" {
		t.Errorf("a summary without a foreground dropped the one already in status: %+v", st.Foreground)
	}
}

func TestRunTokenIsAnHMACOfTheRunUIDUnderTheManagerKey(t *testing.T) {
	k1, k2 := []byte("0123456789abcdef0123456789abcdef"), []byte("fedcba9876543210fedcba9876543210")
	first, again := runToken(k1, "a"), runToken(k1, "a")
	if first == runToken(k1, "b") || first == runToken(k2, "a") || first != again {
		t.Error("token must depend on key and UID, deterministically")
	}
	if len(runToken(k1, "a")) != 64 {
		t.Errorf("token %q is not hex SHA-256", runToken(k1, "a"))
	}
}

func TestAnEvictedRunnerIsReportedWithTheKubeletsReason(t *testing.T) {
	pod := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted",
		Message: `Usage of EmptyDir volume "tmp" exceeds the limit "64Mi". `,
		ContainerStatuses: []corev1.ContainerStatus{{Name: runnerContainer, State: corev1.ContainerState{
			Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "Error"}}}}}}
	end, ok := containerEnd(pod)
	if !ok {
		t.Fatal("no end read from a terminated runner container")
	}
	v, reason, msg := judge(end, false)
	if v != verdictRetry || reason != vacuumv1alpha1.ReasonAttemptFailed ||
		msg != `Evicted: Usage of EmptyDir volume "tmp" exceeds the limit "64Mi".` {
		t.Fatalf("judged %v %s %q, want a retried attempt naming the eviction", v, reason, msg)
	}
}
