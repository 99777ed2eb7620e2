package localnode

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// TestPodOverItsEmptyDirSizeLimitIsEvicted runs pods that put more, or less, than their
// emptyDir's 1Mi sizeLimit into it: over it they are evicted as a kubelet evicts them,
// counting a file the pod unlinked and keeps open (a sort run) as a quota-measuring
// kubelet does.
func TestPodOverItsEmptyDirSizeLimitIsEvicted(t *testing.T) {
	cases := []struct {
		name    string
		args    []string
		evicted bool
	}{
		{"a file over the limit", []string{"--fill", "/scratch/big=2097152"}, true},
		{"an unlinked file held open over the limit", []string{"--fill", "/scratch/run=2097152", "--unlinked"}, true},
		{"a file within the limit", []string{"--fill", "/scratch/small=524288"}, false},
	}
	ns := newNamespace(t)
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			args := append([]string{"--term", "/dev/termination-log", "--sleep", "4s"}, c.args...)
			pod := helperPod(ns, "fill-"+string(rune('a'+i)), args...)
			pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}}
			pod.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
				SizeLimit: ptrQuantity("1Mi")}}}}
			got := waitPod(t, createPod(t, pod), 30*time.Second, "ended", terminal)
			if !c.evicted {
				if got.Status.Phase != corev1.PodSucceeded {
					t.Fatalf("phase %s (%s), want Succeeded within its limit", got.Status.Phase, describe(got))
				}
				return
			}
			if got.Status.Phase != corev1.PodFailed || got.Status.Reason != "Evicted" ||
				!strings.Contains(got.Status.Message, `Usage of EmptyDir volume "scratch" exceeds the limit "1Mi"`) {
				t.Fatalf("phase %s, reason %q, message %q; want Failed, Evicted, naming the volume and limit",
					got.Status.Phase, got.Status.Reason, got.Status.Message)
			}
			if term := got.Status.ContainerStatuses[0].State.Terminated; term == nil || term.ExitCode != 137 {
				t.Fatalf("container state %+v, want terminated by SIGKILL (137)", got.Status.ContainerStatuses[0].State)
			}
		})
	}
}

func ptrQuantity(s string) *resource.Quantity {
	q := resource.MustParse(s)
	return &q
}
