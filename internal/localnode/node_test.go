package localnode

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// report is what podhelper writes to its termination message.
type report struct {
	Args     []string          `json:"args"`
	Env      map[string]string `json:"env"`
	Files    map[string]string `json:"files"`
	Listened string            `json:"listened"`
}

func terminationReport(t *testing.T, pod *corev1.Pod) (report, *corev1.ContainerStateTerminated) {
	t.Helper()
	if len(pod.Status.ContainerStatuses) != 1 || pod.Status.ContainerStatuses[0].State.Terminated == nil {
		t.Fatalf("pod %s has no terminated container status: %+v", pod.Name, pod.Status.ContainerStatuses)
	}
	term := pod.Status.ContainerStatuses[0].State.Terminated
	var r report
	if err := json.Unmarshal([]byte(term.Message), &r); err != nil {
		t.Fatalf("termination message %q is not the helper's report: %v", term.Message, err)
	}
	return r, term
}

func TestNodeIsRegisteredReady(t *testing.T) {
	var node corev1.Node
	ready := false
	for deadline := time.Now().Add(10 * time.Second); !ready && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if err := testClient.Get(context.Background(), types.NamespacedName{Name: DefaultNodeName}, &node); err != nil {
			continue
		}
		for _, c := range node.Status.Conditions {
			ready = ready || (c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue)
		}
	}
	if !ready || node.Labels[LabelLocalNode] != "true" {
		t.Fatalf("node not Ready or unlabelled: labels %v conditions %+v", node.Labels, node.Status.Conditions)
	}
}

// describe says why a pod is where it is, for failure messages.
func describe(p *corev1.Pod) string {
	s := p.Status.Reason + " " + p.Status.Message
	for _, c := range p.Status.ContainerStatuses {
		if t := c.State.Terminated; t != nil {
			s += fmt.Sprintf(" exit %d %s: %s", t.ExitCode, t.Reason, t.Message)
		}
		if w := c.State.Waiting; w != nil {
			s += " waiting " + w.Reason + ": " + w.Message
		}
	}
	if b, err := os.ReadFile(testNode.logPath(p, "main")); err == nil {
		s += "; log: " + string(b)
	}
	return s
}

func TestNodeRunsPodWithVolumesEnvAndOwnAddress(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	pvDir := t.TempDir()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tok"}, Data: map[string][]byte{"token": []byte("s3cret")}}
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-pv"},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: pvDir}},
			ClaimRef:                      &corev1.ObjectReference{Namespace: ns, Name: "data"},
		},
	}
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "data"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			VolumeName:  pv.Name,
		},
	}
	for _, o := range []client.Object{secret, pv, pvc} {
		if err := testClient.Create(ctx, o); err != nil {
			t.Fatalf("create %T: %v", o, err)
		}
	}
	pod := helperPod(ns, "full",
		"--term", "/dev/termination-log",
		"--read", "/var/run/tok/token",
		"--write", "/data/out.txt=written by $(POD_NAME)",
		"--listen", "$(POD_IP):8080",
		`--spec={"dataDir":"/data"}`,
		"$$(POD_IP)")
	c := &pod.Spec.Containers[0]
	c.Env = []corev1.EnvVar{
		{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
		{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
		{Name: "NODE_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
		{Name: "LITERAL", Value: "plain"},
		{Name: "COMPOSED", Value: "$(LITERAL) at /data"},
	}
	c.VolumeMounts = []corev1.VolumeMount{
		{Name: "data", MountPath: "/data", SubPath: "sub"},
		{Name: "tok", MountPath: "/var/run/tok", ReadOnly: true},
		{Name: "tmp", MountPath: "/tmp"},
	}
	pod.Spec.Volumes = []corev1.Volume{
		{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}},
		{Name: "tok", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "tok"}}},
		{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	}
	key := createPod(t, pod)

	got := waitPod(t, key, 20*time.Second, "Succeeded", terminal)
	if got.Status.Phase != corev1.PodSucceeded || got.Spec.NodeName != DefaultNodeName {
		t.Fatalf("phase %s on node %q (%s), want Succeeded on %s", got.Status.Phase, got.Spec.NodeName, describe(got), DefaultNodeName)
	}
	ip := got.Status.PodIP
	if a, err := netip.ParseAddr(ip); err != nil || !netip.MustParsePrefix(testNode.PodCIDR()).Contains(a) || a.As4()[3] < 2 || len(got.Status.PodIPs) != 1 {
		t.Fatalf("podIP %q podIPs %v, want one address of %s from .2 on", ip, got.Status.PodIPs, testNode.PodCIDR())
	}
	r, term := terminationReport(t, got)
	if term.ExitCode != 0 || term.Reason != "Completed" || term.StartedAt.IsZero() || term.FinishedAt.IsZero() {
		t.Fatalf("terminated state %+v, want exit 0, Completed, both times", term)
	}
	wantEnv := map[string]string{"POD_IP": ip, "POD_NAME": "full", "POD_NAMESPACE": ns, "NODE_NAME": DefaultNodeName,
		"LITERAL": "plain", "COMPOSED": "plain at " + filepath.Join(pvDir, "sub")}
	for k, want := range wantEnv {
		if r.Env[k] != want {
			t.Errorf("env %s = %q, want %q", k, r.Env[k], want)
		}
	}
	if !strings.HasPrefix(r.Env["TMPDIR"], stateDir) {
		t.Errorf("TMPDIR %q is not the pod's /tmp volume under %s", r.Env["TMPDIR"], stateDir)
	}
	if r.Listened != ip+":8080" {
		t.Errorf("listened on %q, want %s:8080", r.Listened, ip)
	}
	for p, content := range r.Files {
		if content != "s3cret" || !strings.HasPrefix(p, stateDir) {
			t.Errorf("secret file %s read %q, want s3cret from under the state dir", p, content)
		}
	}
	if want := `--spec={"dataDir":"` + filepath.Join(pvDir, "sub") + `"}`; !contains(r.Args, want) {
		t.Errorf("args %q lack the rewritten %s", r.Args, want)
	}
	if !contains(r.Args, "$(POD_IP)") {
		t.Errorf("args %q lack the escaped literal $(POD_IP)", r.Args)
	}
	if b, err := os.ReadFile(filepath.Join(pvDir, "sub", "out.txt")); err != nil || string(b) != "written by full" {
		t.Errorf("volume file = %q, %v; want %q", b, err, "written by full")
	}
	var gotPVC corev1.PersistentVolumeClaim
	if err := testClient.Get(ctx, client.ObjectKeyFromObject(pvc), &gotPVC); err != nil || gotPVC.Status.Phase != corev1.ClaimBound {
		t.Errorf("claim phase %q (%v), want Bound", gotPVC.Status.Phase, err)
	}
	if b, err := os.ReadFile(testNode.logPath(got, "main")); err != nil || !strings.Contains(string(b), `"listened"`) {
		t.Errorf("log file holds %q (%v), want the helper's stdout", b, err)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestNodeReportsExitCodeAndTerminationMessageOfFailedPod(t *testing.T) {
	ns := newNamespace(t)
	key := createPod(t, helperPod(ns, "fails", "--term", "/dev/termination-log", "--exit", "4"))
	got := waitPod(t, key, 20*time.Second, "Failed", terminal)
	if got.Status.Phase != corev1.PodFailed {
		t.Fatalf("phase %s, want Failed", got.Status.Phase)
	}
	_, term := terminationReport(t, got)
	if term.ExitCode != 4 || term.Reason != "Error" {
		t.Fatalf("terminated %+v, want exit 4 reason Error", term)
	}
}

func TestNodeNeverRunsPodsOutsideItsSelector(t *testing.T) {
	ns := newNamespace(t)
	pod := helperPod(ns, "stranger", "--exit", "0")
	pod.Labels = map[string]string{"app": "other"}
	key := createPod(t, pod)
	time.Sleep(2 * time.Second)
	var got corev1.Pod
	if err := testClient.Get(context.Background(), key, &got); err != nil {
		t.Fatalf("get: %v", err)
	}
	if got.Spec.NodeName != "" || got.Status.Phase != corev1.PodPending {
		t.Fatalf("unselected pod bound to %q in phase %s, want unbound and Pending", got.Spec.NodeName, got.Status.Phase)
	}
	if _, err := os.Stat(testNode.logPath(&got, "main")); !os.IsNotExist(err) {
		t.Fatalf("unselected pod has a log file (err %v): it ran", err)
	}
}

func TestTwoPodsListenOnTheSamePortAtOnce(t *testing.T) {
	ns := newNamespace(t)
	a := createPod(t, helperPod(ns, "a", "--term", "/dev/termination-log", "--listen", "$(POD_IP):9000", "--sleep", "2s"))
	b := createPod(t, helperPod(ns, "b", "--term", "/dev/termination-log", "--listen", "$(POD_IP):9000", "--sleep", "2s"))
	pa := waitPod(t, a, 20*time.Second, "Succeeded", terminal)
	pb := waitPod(t, b, 20*time.Second, "Succeeded", terminal)
	if pa.Status.Phase != corev1.PodSucceeded || pb.Status.Phase != corev1.PodSucceeded {
		t.Fatalf("phases %s (%s) and %s (%s), want both Succeeded", pa.Status.Phase, describe(pa), pb.Status.Phase, describe(pb))
	}
	if pa.Status.PodIP == pb.Status.PodIP {
		t.Fatalf("both pods got address %s", pa.Status.PodIP)
	}
}

func TestDeletingAPodSendsSIGTERMThenSIGKILLAndRemovesIt(t *testing.T) {
	cases := []struct {
		name       string
		ignoreTerm bool
		grace      int64
		minTime    time.Duration
	}{
		{"stops on SIGTERM", false, 30, 0},
		{"killed after the grace period", true, 2, 2 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ns := newNamespace(t)
			args := []string{"--sleep", "5m"}
			if tc.ignoreTerm {
				args = append(args, "--ignore-term")
			}
			pod := helperPod(ns, "sleeper", args...)
			pod.Spec.TerminationGracePeriodSeconds = ptr.To(tc.grace)
			key := createPod(t, pod)
			running := waitPod(t, key, 20*time.Second, "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
			pid := readPid(t, running)
			waitLog(t, running, `"args"`) // the helper has set up its signal handling
			start := time.Now()
			if err := testClient.Delete(context.Background(), running); err != nil {
				t.Fatalf("delete: %v", err)
			}
			deadline := time.Now().Add(20 * time.Second)
			for {
				err := testClient.Get(context.Background(), key, &corev1.Pod{})
				if apierrors.IsNotFound(err) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("pod still present 20s after deletion (err %v)", err)
				}
				time.Sleep(50 * time.Millisecond)
			}
			took := time.Since(start)
			if took < tc.minTime || (tc.minTime == 0 && took > 5*time.Second) {
				t.Fatalf("pod removed after %s; want >= %s (and fast when SIGTERM is obeyed)", took, tc.minTime)
			}
			if err := syscall.Kill(pid, 0); err == nil {
				t.Fatalf("process %d still exists after the pod was removed", pid)
			}
		})
	}
}

// waitLog waits until the pod's log contains s.
func waitLog(t *testing.T, pod *corev1.Pod, s string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, _ := os.ReadFile(testNode.logPath(pod, "main"))
		if strings.Contains(string(b), s) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod log never contained %q; it holds %q", s, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func readPid(t *testing.T, pod *corev1.Pod) int {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		// Running is written before the process starts, so the file may not be there, or
		// not written out, yet.
		b, err := os.ReadFile(filepath.Join(testNode.podDir(pod), "pid"))
		if err == nil && strings.HasSuffix(string(b), "\n") {
			var pid int
			for _, ch := range strings.TrimSpace(string(b)) {
				pid = pid*10 + int(ch-'0')
			}
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("no pid file: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestPodWaitsWhileItsClaimIsUnbound(t *testing.T) {
	ns := newNamespace(t)
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "unbound"},
		Spec: corev1.PersistentVolumeClaimSpec{
			// "" asks for no provisioning: only a volume made for it beforehand binds it.
			StorageClassName: ptr.To(""),
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	if err := testClient.Create(context.Background(), pvc); err != nil {
		t.Fatalf("create pvc: %v", err)
	}
	pod := helperPod(ns, "waiting", "--exit", "0")
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	pod.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "unbound"}}}}
	key := createPod(t, pod)
	got := waitPod(t, key, 20*time.Second, "waiting on its claim", func(p *corev1.Pod) bool {
		cs := p.Status.ContainerStatuses
		return len(cs) == 1 && cs[0].State.Waiting != nil && strings.Contains(cs[0].State.Waiting.Message, "not bound")
	})
	if got.Status.Phase != corev1.PodPending {
		t.Fatalf("phase %s, want Pending while the claim is unbound", got.Status.Phase)
	}
}
