package controllers

import (
	"fmt"
	"maps"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
	"github.com/vacuumops/vacuum-operator/internal/runner/runnerwire"
)

// The runner pod. Its args are the runner's public flags; its security is the operator's
// alone (the user picks only UIDs and GIDs), and it passes the PodSecurity "restricted"
// profile, plus a read-only root filesystem and no service-account token.
const (
	runnerContainer     = "runner"
	runnerBinary        = "/vacuum-runner"
	terminationLogPath  = "/dev/termination-log"
	tokenMountDir       = "/var/run/vacuum/token"
	tokenFilePath       = tokenMountDir + "/" + tokenSecretField
	specMountDir        = "/var/run/vacuum/spec"
	specFilePath        = specMountDir + "/" + specFileName
	specFileName        = "runspec.json"
	runnerLockTimeout   = "2m"
	terminationGraceSec = 30
)

// podName is the runner pod of the given attempt (1-based): deterministic, so a retried
// reconcile adopts the pod it made instead of making a second one.
func podName(run *vacuumv1alpha1.VacuumRun, attempt int32) string {
	return run.Name + "-" + strconv.Itoa(int(attempt))
}

// runnerArgs are the runner's arguments. The RunSpec is a file (the pod's run-spec
// annotation, through a downward-API volume), never an argument the kubelet expands. The
// addresses put the pod IP in brackets, which IPv4 and IPv6 both accept. The control port
// serves HTTPS with the run's certificate from the token Secret; /metrics is plain HTTP on
// its own port.
func runnerArgs() []string {
	return []string{
		"run",
		"--spec-file", specFilePath,
		fmt.Sprintf("--listen=[$(POD_IP)]:%d", runnerwire.ControlPort),
		fmt.Sprintf("--metrics-listen=[$(POD_IP)]:%d", runnerwire.MetricsPort),
		"--tls-cert-file", tokenMountDir + "/" + runnerwire.TLSCertKey,
		"--tls-key-file", tokenMountDir + "/" + runnerwire.TLSKeyKey,
		"--termination-log", terminationLogPath,
		"--control-token-file", tokenFilePath,
		"--lock-timeout", runnerLockTimeout,
	}
}

// runnerPod builds the pod of one attempt.
func (r *RunReconciler) runnerPod(run *vacuumv1alpha1.VacuumRun, attempt int32, specJSON []byte, res runnerwire.Resolved) *corev1.Pod {
	return r.runnerPodNamed(run, podName(run, attempt), specJSON, res)
}

// runnerPodNamed builds a runner pod of the run (an attempt's, or an online run's
// identify pod) that runs the given RunSpec.
func (r *RunReconciler) runnerPodNamed(run *vacuumv1alpha1.VacuumRun, name string, specJSON []byte, res runnerwire.Resolved) *corev1.Pod {
	spec := &run.Spec.VacuumSpec
	image := spec.Runner.Image
	if image == "" {
		image = r.RunnerImage
	}
	labels := map[string]string{
		vacuumv1alpha1.LabelRun:  run.Name,
		"app.kubernetes.io/name": "vacuum-runner",
		LabelManagedBy:           ManagedBy,
	}
	if run.Spec.PolicyName != "" {
		labels[vacuumv1alpha1.LabelPolicy] = run.Spec.PolicyName
	}
	annotations := map[string]string{vacuumv1alpha1.AnnotationRunSpec: string(specJSON)}
	opts := &spec.Runner.RunnerPodOptions
	// The API refuses the operator's prefixes in podLabels and podAnnotations; the
	// operator's own keys are still set last, so no key of the user's can replace them.
	labels = withUserKeys(opts.PodLabels, labels)
	annotations = withUserKeys(opts.PodAnnotations, annotations)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: run.Namespace, Name: name, Labels: labels,
			Annotations: annotations},
		Spec: corev1.PodSpec{
			PriorityClassName:             opts.PriorityClassName,
			ImagePullSecrets:              opts.ImagePullSecrets,
			TopologySpreadConstraints:     opts.TopologySpreadConstraints,
			RestartPolicy:                 corev1.RestartPolicyNever,
			AutomountServiceAccountToken:  ptr.To(false),
			EnableServiceLinks:            ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To(int64(terminationGraceSec)),
			SecurityContext:               podSecurityContext(spec.Runner.PodSecurityContext),
			NodeSelector:                  spec.Runner.NodeSelector,
			Tolerations:                   spec.Runner.Tolerations,
			Affinity:                      spec.Runner.Affinity,
			Volumes:                       runnerVolumes(run),
			Containers: []corev1.Container{{
				Name:            runnerContainer,
				Image:           image,
				ImagePullPolicy: spec.Runner.ImagePullPolicy,
				Command:         []string{runnerBinary},
				Args:            runnerArgs(),
				Env: []corev1.EnvVar{{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{
					FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}}},
				Ports: []corev1.ContainerPort{
					{Name: "control", ContainerPort: runnerwire.ControlPort, Protocol: corev1.ProtocolTCP},
					{Name: "metrics", ContainerPort: runnerwire.MetricsPort, Protocol: corev1.ProtocolTCP},
				},
				Resources:                runnerResources(spec.Runner.Resources, podMemory(spec, res)),
				TerminationMessagePath:   terminationLogPath,
				TerminationMessagePolicy: corev1.TerminationMessageReadFile,
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: ptr.To(false),
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
					ReadOnlyRootFilesystem:   ptr.To(true),
					RunAsNonRoot:             ptr.To(true),
					SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
				},
				VolumeMounts: append(targetMounts(spec.Target),
					corev1.VolumeMount{Name: "token", MountPath: tokenMountDir, ReadOnly: true},
					corev1.VolumeMount{Name: "spec", MountPath: specMountDir, ReadOnly: true},
					corev1.VolumeMount{Name: "tmp", MountPath: "/tmp"},
				),
			}},
		},
	}
}

func runnerVolumes(run *vacuumv1alpha1.VacuumRun) []corev1.Volume {
	return append(targetVolumes(run.Spec.Target), []corev1.Volume{
		// 0444, not 0440: without an fsGroup the kubelet leaves the file owned by root, and
		// the runner (non-root, UID 65532 in our image) could not read it. Only this pod's one
		// container sees the mount.
		// Only the token key is projected: whatever else a Secret of that name held would
		// never reach the pod.
		{Name: "token", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: tokenSecretName(run), DefaultMode: ptr.To(int32(0o444)), Items: []corev1.KeyToPath{
				{Key: tokenSecretField, Path: tokenSecretField},
				{Key: runnerwire.TLSCertKey, Path: runnerwire.TLSCertKey},
				{Key: runnerwire.TLSKeyKey, Path: runnerwire.TLSKeyKey},
			}}}},
		{Name: "spec", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{
			DefaultMode: ptr.To(int32(0o444)), Items: []corev1.DownwardAPIVolumeFile{{Path: specFileName,
				FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.annotations['" + vacuumv1alpha1.AnnotationRunSpec + "']"}}}}}},
		{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
			SizeLimit: ptr.To(resource.MustParse("64Mi"))}}},
	}...)
}

// podSecurityContext is the restricted profile plus the IDs the user chose.
func podSecurityContext(u *vacuumv1alpha1.RunnerPodSecurityContext) *corev1.PodSecurityContext {
	sc := &corev1.PodSecurityContext{
		RunAsNonRoot:   ptr.To(true),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	if u != nil {
		sc.RunAsUser, sc.RunAsGroup, sc.FSGroup = u.RunAsUser, u.RunAsGroup, u.FSGroup
		sc.FSGroupChangePolicy, sc.SupplementalGroups = u.FSGroupChangePolicy, u.SupplementalGroups
	}
	return sc
}

// podMemory is the runner's default memory: what it checks for with a volume (buffer pool +
// parallelism x maintenance memory + 64Mi), and 64Mi for a server target, whose vacuum
// works in the server's memory.
func podMemory(spec *vacuumv1alpha1.VacuumSpec, res runnerwire.Resolved) int64 {
	if spec.Target.Server != nil {
		return onlineRunnerMemory
	}
	return runnerwire.MemoryRequirement(res)
}

// runnerResources are the user's resources, with memory request and limit defaulting to
// mem bytes (podMemory).
func runnerResources(user corev1.ResourceRequirements, mem64 int64) corev1.ResourceRequirements {
	out := *user.DeepCopy()
	mem := *resource.NewQuantity(mem64, resource.BinarySI)
	if out.Requests == nil {
		out.Requests = corev1.ResourceList{}
	}
	if out.Limits == nil {
		out.Limits = corev1.ResourceList{}
	}
	if _, ok := out.Limits[corev1.ResourceMemory]; !ok {
		if req, ok := out.Requests[corev1.ResourceMemory]; ok && req.Cmp(mem) > 0 {
			mem = req // a limit under the user's request would be refused
		}
		out.Limits[corev1.ResourceMemory] = mem
	}
	if _, ok := out.Requests[corev1.ResourceMemory]; !ok {
		out.Requests[corev1.ResourceMemory] = out.Limits[corev1.ResourceMemory]
	}
	return out
}

// withUserKeys is the user's keys with the operator's own set over them.
func withUserKeys(user, own map[string]string) map[string]string {
	if len(user) == 0 {
		return own
	}
	out := make(map[string]string, len(user)+len(own))
	maps.Copy(out, user)
	maps.Copy(out, own)
	return out
}
