package localnode

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// The envtest suite: one real kube-apiserver and etcd, one local node running the podhelper
// test program as image example.test/helper.
var (
	testCfg    *rest.Config
	testClient client.Client
	testNode   *Node
	stateDir   string
	imageDir   string // the helper image's directory
)

const helperImage = "example.test/helper:v1"

// testRestartBackoff is the suite node's first back-off before a restart (a kubelet's: 10 s).
const testRestartBackoff = 300 * time.Millisecond

func TestMain(m *testing.M) {
	if dir := os.Getenv(holdAddressEnv); dir != "" {
		os.Exit(holdAddress(dir))
	}
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) int {
	assets, err := assetsDir()
	if err != nil {
		println("localnode tests need envtest's binaries:", err.Error())
		return 1
	}
	work, err := os.MkdirTemp("", "localnode-test-")
	if err != nil {
		println(err.Error())
		return 1
	}
	defer func() { _ = os.RemoveAll(work) }()
	imageDir = filepath.Join(work, "image")
	if out, err := exec.Command("go", "build", "-o", filepath.Join(imageDir, "helper"), "./testdata/podhelper").CombinedOutput(); err != nil {
		println("build podhelper:", err.Error(), string(out))
		return 1
	}
	env := &envtest.Environment{BinaryAssetsDirectory: assets}
	testCfg, err = env.Start()
	if err != nil {
		println("start envtest:", err.Error())
		return 1
	}
	defer func() { _ = env.Stop() }()
	testClient, err = client.New(testCfg, client.Options{})
	if err != nil {
		println(err.Error())
		return 1
	}
	stateDir = filepath.Join(work, "state")
	testNode, err = New(testCfg, Config{Images: map[string]string{"example.test/helper": imageDir}, StateDir: stateDir,
		RestartBackoff: testRestartBackoff})
	if err != nil {
		println(err.Error())
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- testNode.Run(ctx) }()
	code := m.Run()
	cancel()
	if err := <-done; err != nil {
		println("node:", err.Error())
		return 1
	}
	return code
}

// assetsDir is KUBEBUILDER_ASSETS, or what hack/setup-envtest.sh prints (instant once built).
func assetsDir() (string, error) {
	if d := os.Getenv("KUBEBUILDER_ASSETS"); d != "" {
		return d, nil
	}
	out, err := exec.Command(filepath.Join("..", "..", "hack", "setup-envtest.sh")).Output()
	return strings.TrimSpace(string(out)), err
}

// newNamespace creates a namespace for one test.
func newNamespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "localnode-"}}
	if err := testClient.Create(context.Background(), ns); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	return ns.Name
}

// helperPod is an allowed pod running podhelper with args.
func helperPod(ns, name string, args ...string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			Labels: map[string]string{"app.kubernetes.io/managed-by": "vacuum-operator"}},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name: "main", Image: helperImage, Command: []string{"/helper"}, Args: args,
				Env: []corev1.EnvVar{{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{
					FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}}},
			}},
		},
	}
}

// waitPod polls the pod until cond holds or the timeout passes, and returns it.
func waitPod(t *testing.T, key types.NamespacedName, timeout time.Duration, what string, cond func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var pod corev1.Pod
	for {
		err := testClient.Get(context.Background(), key, &pod)
		if err == nil && cond(&pod) {
			return &pod
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod %s: %s not reached in %s (phase %q, err %v, status %+v)", key, what, timeout, pod.Status.Phase, err, pod.Status)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// terminal is the condition "the pod has ended".
func terminal(p *corev1.Pod) bool { return isTerminal(p.Status.Phase) }

// createPod creates a pod and returns its key.
func createPod(t *testing.T, pod *corev1.Pod) types.NamespacedName {
	t.Helper()
	if err := testClient.Create(context.Background(), pod); err != nil {
		t.Fatalf("create pod %s: %v", pod.Name, err)
	}
	return client.ObjectKeyFromObject(pod)
}
