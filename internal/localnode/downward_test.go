package localnode

import (
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestDownwardAPIVolumeHoldsTheAnnotationVerbatim(t *testing.T) {
	const spec = `{"tables":["price$$","$(POD_IP)"]}`
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "r-1", Namespace: "db",
		Annotations: map[string]string{"vacuum.vacuumops.io/run-spec": spec}}}
	src := &corev1.DownwardAPIVolumeSource{Items: []corev1.DownwardAPIVolumeFile{
		{Path: "runspec.json", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.annotations['vacuum.vacuumops.io/run-spec']"}},
		{Path: "name", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}},
	}}
	dir := filepath.Join(t.TempDir(), "spec")
	if err := writeDownwardAPI(pod, src, dir); err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]string{"runspec.json": spec, "name": "r-1"} {
		got, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil || string(got) != want {
			t.Errorf("%s = %q (%v), want %q", file, got, err, want)
		}
	}
	bad := &corev1.DownwardAPIVolumeSource{Items: []corev1.DownwardAPIVolumeFile{
		{Path: "cpu", ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.cpu"}}}}
	if err := writeDownwardAPI(pod, bad, filepath.Join(t.TempDir(), "bad")); err == nil {
		t.Error("a resourceFieldRef, which the local node does not run, was accepted")
	}
}
