package localnode

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
)

// updateStatus applies mutate to a fresh copy of the pod (if it still has uid) and writes
// its status, retrying on conflicts. A pod that is gone is not an error.
func (n *Node) updateStatus(ctx context.Context, key types.NamespacedName, uid types.UID, mutate func(*corev1.Pod)) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var pod corev1.Pod
		if err := n.reader.Get(ctx, key, &pod); err != nil {
			return err
		}
		if pod.UID != uid {
			return nil
		}
		mutate(&pod)
		return n.client.Status().Update(ctx, &pod)
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("update status of pod %s: %w", key, err)
	}
	return nil
}

// isTerminal reports whether a pod phase is final.
func isTerminal(p corev1.PodPhase) bool { return p == corev1.PodSucceeded || p == corev1.PodFailed }

// setCondition sets one pod condition, keeping its transition time if unchanged.
func setCondition(pod *corev1.Pod, t corev1.PodConditionType, s corev1.ConditionStatus, reason string) {
	now := metav1.Now()
	for i := range pod.Status.Conditions {
		c := &pod.Status.Conditions[i]
		if c.Type == t {
			if c.Status != s {
				c.LastTransitionTime = now
			}
			c.Status, c.Reason = s, reason
			return
		}
	}
	pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: t, Status: s, Reason: reason, LastTransitionTime: now})
}

// setReadiness sets Initialized and the two readiness conditions.
func setReadiness(pod *corev1.Pod, ready bool, reason string) {
	s := corev1.ConditionFalse
	if ready {
		s = corev1.ConditionTrue
	}
	setCondition(pod, corev1.PodInitialized, corev1.ConditionTrue, "")
	setCondition(pod, corev1.ContainersReady, s, reason)
	setCondition(pod, corev1.PodReady, s, reason)
}

// containerStatus is the status of the pod's one container in the given state, with the
// restarts before it.
func containerStatus(pod *corev1.Pod, state corev1.ContainerState, ready bool, rs restartState) []corev1.ContainerStatus {
	c := pod.Spec.Containers[0]
	started := state.Running != nil
	cs := corev1.ContainerStatus{
		Name: c.Name, Image: c.Image, ImageID: "localnode://" + c.Image,
		State: state, Ready: ready, Started: &started, RestartCount: rs.count,
		ContainerID: "localnode://" + string(pod.UID),
	}
	if rs.last != nil {
		cs.LastTerminationState = corev1.ContainerState{Terminated: rs.last}
	}
	return []corev1.ContainerStatus{cs}
}

// markWaiting shows why a pod has not started yet.
func markWaiting(pod *corev1.Pod, reason, message string) {
	pod.Status.Phase = corev1.PodPending
	pod.Status.HostIP = "127.0.0.1"
	pod.Status.HostIPs = []corev1.HostIP{{IP: "127.0.0.1"}}
	setReadiness(pod, false, "ContainersNotReady")
	pod.Status.ContainerStatuses = containerStatus(pod, corev1.ContainerState{
		Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: message}}, false, restartState{})
}

// markBackOff shows a container that ended and waits delay before it is started again: the
// pod stays Running but not Ready, its container waiting in CrashLoopBackOff, as with a
// kubelet.
func markBackOff(pod *corev1.Pod, rs restartState, last corev1.ContainerStateTerminated, delay time.Duration) {
	pod.Status.Phase = corev1.PodRunning
	setReadiness(pod, false, "ContainersNotReady")
	rs.last = &last
	pod.Status.ContainerStatuses = containerStatus(pod, corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
		Reason:  "CrashLoopBackOff",
		Message: fmt.Sprintf("back-off %s restarting container %s of pod %s/%s", delay, pod.Spec.Containers[0].Name, pod.Namespace, pod.Name),
	}}, false, rs)
}

// markRunning records a started process (the restarts-th restart of its container).
func markRunning(pod *corev1.Pod, ip string, started metav1.Time, rs restartState) {
	pod.Status.Phase = corev1.PodRunning
	pod.Status.Reason, pod.Status.Message = "", ""
	pod.Status.HostIP = "127.0.0.1"
	pod.Status.HostIPs = []corev1.HostIP{{IP: "127.0.0.1"}}
	pod.Status.PodIP = ip
	pod.Status.PodIPs = []corev1.PodIP{{IP: ip}}
	if pod.Status.StartTime == nil {
		pod.Status.StartTime = &started
	}
	setReadiness(pod, true, "")
	pod.Status.ContainerStatuses = containerStatus(pod, corev1.ContainerState{
		Running: &corev1.ContainerStateRunning{StartedAt: started}}, true, rs)
}

// terminatedState is how a container that started at started ended.
func terminatedState(started metav1.Time, res exitResult) corev1.ContainerStateTerminated {
	reason := "Completed"
	if res.exitCode != 0 || res.evicted != "" {
		reason = "Error"
	}
	return corev1.ContainerStateTerminated{
		ExitCode: res.exitCode, Reason: reason, Message: res.message,
		StartedAt: started, FinishedAt: res.finishedAt,
		ContainerID: "localnode://" + res.containerID,
	}
}

// markTerminated records how the process ended: Succeeded on exit 0, Failed otherwise.
func markTerminated(pod *corev1.Pod, started metav1.Time, res exitResult, rs restartState) {
	pod.Status.Phase = corev1.PodSucceeded
	if res.exitCode != 0 {
		pod.Status.Phase = corev1.PodFailed
	}
	if res.evicted != "" { // as a kubelet's eviction manager reports it
		pod.Status.Phase = corev1.PodFailed
		pod.Status.Reason, pod.Status.Message = "Evicted", res.evicted
	}
	setReadiness(pod, false, "PodCompleted")
	res.containerID = string(pod.UID)
	term := terminatedState(started, res)
	pod.Status.ContainerStatuses = containerStatus(pod, corev1.ContainerState{Terminated: &term}, false, rs)
}

// markFailed fails a pod that could not run at all.
func markFailed(pod *corev1.Pod, reason, message string) {
	now := metav1.Now()
	pod.Status.Phase = corev1.PodFailed
	pod.Status.Reason, pod.Status.Message = reason, message
	setReadiness(pod, false, "PodFailed")
	if len(pod.Spec.Containers) > 0 {
		pod.Status.ContainerStatuses = containerStatus(pod, corev1.ContainerState{
			Terminated: &corev1.ContainerStateTerminated{ExitCode: 128, Reason: reason, Message: message,
				StartedAt: now, FinishedAt: now}}, false, restartState{})
	}
}
