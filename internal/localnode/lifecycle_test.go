package localnode

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestRestartPolicyDecidesWhetherAnEndedContainerStartsAgain(t *testing.T) {
	cases := []struct {
		name    string
		policy  corev1.RestartPolicy
		exit    string
		restart bool
		phase   corev1.PodPhase // when it does not restart
	}{
		{"always-after-success", corev1.RestartPolicyAlways, "0", true, ""},
		{"always-after-failure", corev1.RestartPolicyAlways, "3", true, ""},
		{"onfailure-after-failure", corev1.RestartPolicyOnFailure, "3", true, ""},
		{"onfailure-after-success", corev1.RestartPolicyOnFailure, "0", false, corev1.PodSucceeded},
		{"never-after-failure", corev1.RestartPolicyNever, "3", false, corev1.PodFailed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ns := newNamespace(t)
			pod := helperPod(ns, c.name, "--exit", c.exit, "--sleep", "100ms")
			pod.Spec.RestartPolicy = c.policy
			key := createPod(t, pod)
			if !c.restart {
				got := waitPod(t, key, 20*time.Second, string(c.phase), terminal)
				if got.Status.Phase != c.phase || got.Status.ContainerStatuses[0].RestartCount != 0 {
					t.Fatalf("phase %s with %d restarts (%s), want %s and none", got.Status.Phase, got.Status.ContainerStatuses[0].RestartCount, describe(got), c.phase)
				}
				return
			}
			first := waitPod(t, key, 20*time.Second, "Running", func(p *corev1.Pod) bool { return p.Status.PodIP != "" })
			// Back-offs of 0.3 s and 0.6 s: two restarts within seconds.
			got := waitPod(t, key, 20*time.Second, "two restarts", func(p *corev1.Pod) bool {
				return isTerminal(p.Status.Phase) || len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].RestartCount >= 2
			})
			if got.Status.Phase != corev1.PodRunning {
				t.Fatalf("phase %s (%s), want the pod kept Running while its container restarts", got.Status.Phase, describe(got))
			}
			cs := got.Status.ContainerStatuses[0]
			last := cs.LastTerminationState.Terminated
			if last == nil || last.ExitCode != int32(map[string]int{"0": 0, "3": 3}[c.exit]) || last.FinishedAt.IsZero() {
				t.Fatalf("last termination state %+v, want the exit code %s", cs.LastTerminationState, c.exit)
			}
			if got.Status.PodIP != first.Status.PodIP {
				t.Fatalf("the restarted container has address %s, the pod had %s", got.Status.PodIP, first.Status.PodIP)
			}
			if err := testClient.Delete(context.Background(), got); err != nil {
				t.Fatal(err)
			}
			waitGone(t, key, 20*time.Second)
		})
	}
}

// waitGone waits until the pod no longer exists.
func waitGone(t *testing.T, key types.NamespacedName, timeout time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(timeout); ; time.Sleep(50 * time.Millisecond) {
		err := testClient.Get(context.Background(), key, &corev1.Pod{})
		if apierrors.IsNotFound(err) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod %s still there after %s (%v)", key, timeout, err)
		}
	}
}

func TestUnboundClaimIsProvisionedOnTheNodeAndBound(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "data-db-0"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("2Gi")}},
		},
	}
	if err := testClient.Create(ctx, pvc); err != nil {
		t.Fatal(err)
	}
	pod := helperPod(ns, "db-0", "--term", "/dev/termination-log", "--write", "/data/marker=written")
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	pod.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: pvc.Name}}}}
	got := waitPod(t, createPod(t, pod), 20*time.Second, "Succeeded", terminal)
	if got.Status.Phase != corev1.PodSucceeded {
		t.Fatalf("phase %s (%s), want Succeeded", got.Status.Phase, describe(got))
	}
	if err := testClient.Get(ctx, types.NamespacedName{Namespace: ns, Name: pvc.Name}, pvc); err != nil {
		t.Fatal(err)
	}
	if pvc.Status.Phase != corev1.ClaimBound || pvc.Spec.VolumeName != "pvc-"+string(pvc.UID) {
		t.Fatalf("claim %s bound to %q, want Bound to pvc-%s", pvc.Status.Phase, pvc.Spec.VolumeName, pvc.UID)
	}
	var pv corev1.PersistentVolume
	if err := testClient.Get(ctx, types.NamespacedName{Name: pvc.Spec.VolumeName}, &pv); err != nil {
		t.Fatal(err)
	}
	if pv.Status.Phase != corev1.VolumeBound || pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.UID != pvc.UID ||
		pv.Spec.Capacity.Storage().String() != "2Gi" || pv.Spec.HostPath == nil {
		t.Fatalf("volume %+v status %s, want a Bound 2Gi hostPath volume claimed by the claim", pv.Spec, pv.Status.Phase)
	}
	if !strings.HasPrefix(pv.Spec.HostPath.Path, filepath.Join(stateDir, "volumes")+"/") {
		t.Fatalf("volume directory %s is not under the node's %s", pv.Spec.HostPath.Path, filepath.Join(stateDir, "volumes"))
	}
	if b, err := os.ReadFile(filepath.Join(pv.Spec.HostPath.Path, "marker")); err != nil || string(b) != "written" {
		t.Fatalf("the pod's write to /data/marker is not in the volume: %q (%v)", b, err)
	}
}

func TestNodeForAllPodsRunsUnselectedPodsAndHasNoTaint(t *testing.T) {
	all, err := New(testCfg, Config{NodeName: "all-pods-node", AllPods: true,
		Images: map[string]string{"example.test/helper": imageDir}, StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- all.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("all-pods node: %v", err)
		}
	}()
	ns := newNamespace(t)
	pod := helperPod(ns, "unlabelled", "--exit", "0")
	pod.Labels = nil // the suite's node does not select it
	got := waitPod(t, createPod(t, pod), 30*time.Second, "Succeeded", terminal)
	if got.Status.Phase != corev1.PodSucceeded || got.Spec.NodeName != "all-pods-node" {
		t.Fatalf("phase %s on %q (%s), want Succeeded on all-pods-node", got.Status.Phase, got.Spec.NodeName, describe(got))
	}
	var node corev1.Node
	if err := testClient.Get(context.Background(), types.NamespacedName{Name: "all-pods-node"}, &node); err != nil {
		t.Fatal(err)
	}
	for _, taint := range node.Spec.Taints {
		if taint.Key == LabelLocalNode {
			t.Fatalf("the all-pods node has the local node's taint: %v", node.Spec.Taints)
		}
	}
}
