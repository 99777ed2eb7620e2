package v1alpha1

import corev1 "k8s.io/api/core/v1"

// RunnerPodOptions are the runner pod's scheduling and metadata options users ask for
// beside RunnerSpec's node placement: a priority class, pull secrets for a private image,
// the pod's own labels and annotations, and spreading. They are inlined into runner.
type RunnerPodOptions struct {
	// priorityClassName is the runner pod's PriorityClass. It must be one the operator's
	// admin allows (--allowed-priority-classes), else the run fails with reason
	// PriorityClassNotAllowed: a priority can preempt other tenants' pods.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +optional
	PriorityClassName string `json:"priorityClassName,omitempty"`
	// imagePullSecrets name Secrets of the run's namespace that pull runner.image.
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	// +optional
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`
	// podLabels are added to the runner pod's labels. Keys with the vacuum.vacuumops.io/ and
	// app.kubernetes.io/ prefixes are the operator's and are refused.
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(k, !k.startsWith('vacuum.vacuumops.io/') && !k.startsWith('app.kubernetes.io/'))",message="runner.podLabels must not use the vacuum.vacuumops.io/ or app.kubernetes.io/ key prefixes, which are the operator's"
	// +optional
	PodLabels map[string]string `json:"podLabels,omitempty"`
	// podAnnotations are added to the runner pod's annotations (say
	// cluster-autoscaler.kubernetes.io/safe-to-evict: "false" for a long FULL). Keys with the
	// vacuum.vacuumops.io/ and app.kubernetes.io/ prefixes are the operator's and are refused.
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(k, !k.startsWith('vacuum.vacuumops.io/') && !k.startsWith('app.kubernetes.io/'))",message="runner.podAnnotations must not use the vacuum.vacuumops.io/ or app.kubernetes.io/ key prefixes, which are the operator's"
	// +optional
	PodAnnotations map[string]string `json:"podAnnotations,omitempty"`
	// topologySpreadConstraints of the runner pod.
	// +kubebuilder:validation:MaxItems=8
	// +listType=atomic
	// +optional
	TopologySpreadConstraints []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints,omitempty"`
}
