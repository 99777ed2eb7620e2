package localnode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// retryAfter is how soon a pod waiting for its volumes or env sources is looked at again.
const retryAfter = time.Second

// Reconcile binds, starts, stops and removes one pod. Only pods matching the selector reach
// it: the node's pod cache is filtered by the selector, so it never sees, binds or runs
// any other pod, even one bound to it by someone else.
func (n *Node) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var pod corev1.Pod
	if err := n.client.Get(ctx, req.NamespacedName, &pod); err != nil {
		if apierrors.IsNotFound(err) {
			n.forgetGone(req.NamespacedName) // force-deleted: stop its process
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	switch {
	case pod.Spec.NodeName == "":
		return ctrl.Result{}, n.bind(ctx, &pod)
	case pod.Spec.NodeName != n.cfg.NodeName:
		return ctrl.Result{}, nil
	case pod.DeletionTimestamp != nil:
		return n.deletePod(ctx, &pod)
	case isTerminal(pod.Status.Phase):
		return ctrl.Result{}, nil
	}
	if p := n.process(pod.UID); p != nil {
		if p.exited() && !p.isReported() && !p.isRestarting() {
			// The process ended but its end never reached the API server (it was down):
			// report it now, as a kubelet keeps doing until the API server takes it.
			return ctrl.Result{}, n.reportEnd(ctx, p)
		}
		return ctrl.Result{}, nil
	}
	if pod.Status.Phase == corev1.PodRunning {
		// Running, but not by this node process: the node restarted and lost it.
		return ctrl.Result{}, n.updateStatus(ctx, req.NamespacedName, pod.UID, func(p *corev1.Pod) {
			markFailed(p, "NodeRestarted", "the local node restarted while the pod ran; its process is gone")
		})
	}
	return n.start(ctx, &pod)
}

// bind binds an allowed pod to this node through pods/binding, as a scheduler would.
func (n *Node) bind(ctx context.Context, pod *corev1.Pod) error {
	if pod.DeletionTimestamp != nil || isTerminal(pod.Status.Phase) || !n.fitsNodeSelector(pod) {
		return nil
	}
	b := &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
		Target:     corev1.ObjectReference{Kind: "Node", Name: n.cfg.NodeName},
	}
	if err := n.client.SubResource("binding").Create(ctx, pod, b); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return nil // bound meanwhile, or gone
		}
		return fmt.Errorf("bind pod %s/%s to %s: %w", pod.Namespace, pod.Name, n.cfg.NodeName, err)
	}
	n.cfg.Log.Info("bound pod", "pod", client.ObjectKeyFromObject(pod))
	return nil
}

// fitsNodeSelector reports whether the pod's nodeSelector matches this node's labels.
func (n *Node) fitsNodeSelector(pod *corev1.Pod) bool {
	own := map[string]string{LabelLocalNode: "true", "kubernetes.io/hostname": n.cfg.NodeName, "kubernetes.io/os": "linux"}
	for k, v := range pod.Spec.NodeSelector {
		if own[k] != v {
			return false
		}
	}
	return true
}

// start prepares and starts a pod's process.
func (n *Node) start(ctx context.Context, pod *corev1.Pod) (ctrl.Result, error) {
	key := client.ObjectKeyFromObject(pod)
	ip, err := n.ips.acquire()
	if err != nil {
		return ctrl.Result{RequeueAfter: retryAfter}, n.updateStatus(ctx, key, pod.UID, func(p *corev1.Pod) { markWaiting(p, "ContainerCreating", err.Error()) })
	}
	res, started, err := n.launch(ctx, pod, ip, restartState{})
	if !started {
		n.ips.release(ip)
	}
	return res, err
}

// restartState is what a restarted container carries over from the ones before it.
type restartState struct {
	count int32                            // restarts so far
	last  *corev1.ContainerStateTerminated // how the previous container ended
	ran   time.Duration                    // how long the previous container ran
}

// launch prepares the pod's volumes and environment and starts its process on ip, writing
// Running first; started says whether it did (the caller holds ip, and releases it if not).
// A result with RequeueAfter means it must wait; a pod that can never run is marked Failed.
func (n *Node) launch(ctx context.Context, pod *corev1.Pod, ip string, rs restartState) (_ ctrl.Result, started bool, _ error) {
	key := client.ObjectKeyFromObject(pod)
	l, err := n.prepare(ctx, pod, ip)
	if err != nil {
		var we *waitError
		var pe *podError
		switch {
		case errors.As(err, &we):
			return ctrl.Result{RequeueAfter: retryAfter}, false, n.updateStatus(ctx, key, pod.UID, func(p *corev1.Pod) { markWaiting(p, we.reason, we.message) })
		case errors.As(err, &pe):
			return ctrl.Result{}, false, n.updateStatus(ctx, key, pod.UID, func(p *corev1.Pod) { markFailed(p, pe.reason, pe.message) })
		}
		return ctrl.Result{}, false, err
	}
	startedAt := metav1.Now()
	// Running is written before the process starts, so the watcher's terminal status, written
	// when the process ends, can never be overtaken by it.
	if err := n.updateStatus(ctx, key, pod.UID, func(p *corev1.Pod) { markRunning(p, ip, startedAt, rs) }); err != nil {
		return ctrl.Result{}, false, err
	}
	cmd, err := startProcess(l, n.logPath(pod, pod.Spec.Containers[0].Name))
	if cmd == nil {
		return ctrl.Result{}, false, n.updateStatus(ctx, key, pod.UID, func(p *corev1.Pod) { markFailed(p, "StartError", err.Error()) })
	}
	if err != nil {
		n.cfg.Log.Error(err, "pod started with a problem", "pod", key)
	}
	p := &podProcess{uid: pod.UID, key: key, ip: ip, termPath: l.termPath, cmd: cmd, startedAt: startedAt, done: make(chan struct{}),
		abandoned: make(chan struct{}), limits: n.volumeLimits(pod), restartPolicy: pod.Spec.RestartPolicy, restarts: rs}
	n.mu.Lock()
	n.procs[pod.UID] = p
	n.wg.Add(1)
	if len(p.limits) > 0 {
		n.wg.Add(1)
	}
	n.mu.Unlock()
	n.cfg.Log.Info("started pod", "pod", key, "ip", ip, "pid", cmd.Process.Pid, "restarts", rs.count)
	go n.watch(p)
	if len(p.limits) > 0 {
		go n.enforceLimits(p)
	}
	return ctrl.Result{}, true, nil
}

// watch waits for a process to end, then restarts it as the pod's restart policy says, or
// frees its address and writes its terminal status.
func (n *Node) watch(p *podProcess) {
	defer n.wg.Done()
	p.wait()
	p.mu.Lock()
	res := p.result
	p.mu.Unlock()
	n.cfg.Log.Info("pod process ended", "pod", p.key, "exitCode", res.exitCode, "signal", res.signal)
	if p.isRestarting() {
		n.restart(p)
		return
	}
	n.ips.release(p.ip)
	// Keep trying until the API server takes the pod's end or the node stops: a pod whose
	// process is gone must never stay Running (Reconcile also re-reports it on any event).
	backoff := 200 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(n.life, reportTimeout)
		err := n.reportEnd(ctx, p)
		cancel()
		if err == nil {
			return
		}
		n.cfg.Log.Error(err, "write terminal status; will retry", "pod", p.key, "retryIn", backoff)
		select {
		case <-n.life.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 10*time.Second)
	}
}

// restart starts the container of p's pod again on the same address after the kubelet's
// back-off (Config.RestartBackoff doubled per restart, at most 5 minutes, back to the start
// once a container ran 10 minutes), showing CrashLoopBackOff meanwhile. It gives up, freeing
// the address, when the pod is deleted or the node stops first.
func (n *Node) restart(p *podProcess) {
	p.mu.Lock()
	res := p.result
	p.mu.Unlock()
	res.containerID = fmt.Sprintf("%s-%d", p.uid, p.restarts.count)
	last := terminatedState(p.startedAt, res)
	rs := restartState{count: p.restarts.count + 1, last: &last, ran: res.finishedAt.Sub(p.startedAt.Time)}
	delay := n.cfg.RestartBackoff
	if rs.ran < 10*time.Minute {
		for i := int32(0); i < p.restarts.count && delay < maxRestartBackoff; i++ {
			delay *= 2
		}
	}
	delay = min(delay, maxRestartBackoff)
	ctx, cancel := context.WithTimeout(n.life, reportTimeout)
	err := n.updateStatus(ctx, p.key, p.uid, func(pod *corev1.Pod) { markBackOff(pod, p.restarts, last, delay) })
	cancel()
	if err != nil {
		n.cfg.Log.Error(err, "write back-off status", "pod", p.key)
	}
	select {
	case <-time.After(delay):
	case <-p.abandoned:
	case <-n.stopping:
	}
	var pod corev1.Pod
	err = n.reader.Get(n.life, p.key, &pod)
	if err != nil || pod.UID != p.uid || pod.DeletionTimestamp != nil || n.process(p.uid) != p || p.isAbandoned() || n.isStopping() {
		n.ips.release(p.ip)
		return
	}
	result, started, err := n.launch(n.life, &pod, p.ip, rs)
	if !started {
		// It cannot start again now (a Secret gone, the API server away): the pod is left to
		// Reconcile, which sees a Running pod no process of this node runs.
		n.cfg.Log.Error(err, "restart container", "pod", p.key, "waiting", result.RequeueAfter > 0)
		n.forget(p.uid)
		n.ips.release(p.ip)
	}
}

// maxRestartBackoff is the kubelet's cap on the back-off between restarts.
const maxRestartBackoff = 5 * time.Minute

// reportTimeout bounds one attempt to write a pod's terminal status.
const reportTimeout = 10 * time.Second

// reportEnd writes the terminal status of an ended process once; later calls do nothing.
func (n *Node) reportEnd(ctx context.Context, p *podProcess) error {
	if p.isReported() {
		return nil
	}
	p.mu.Lock()
	res := p.result
	p.mu.Unlock()
	if err := n.updateStatus(ctx, p.key, p.uid, func(pod *corev1.Pod) { markTerminated(pod, p.startedAt, res, p.restarts) }); err != nil {
		return err
	}
	p.mu.Lock()
	p.reported = true
	p.mu.Unlock()
	return nil
}

// deletePod stops a deleted pod's process (SIGTERM, SIGKILL after the grace period) and,
// once it has ended, removes the pod object with grace 0 and its host directory.
func (n *Node) deletePod(ctx context.Context, pod *corev1.Pod) (ctrl.Result, error) {
	if p := n.process(pod.UID); p != nil && !p.exited() {
		grace := 30 * time.Second
		if s := pod.DeletionGracePeriodSeconds; s != nil {
			grace = time.Duration(*s) * time.Second
		} else if s := pod.Spec.TerminationGracePeriodSeconds; s != nil {
			grace = time.Duration(*s) * time.Second
		}
		p.terminate(grace)
		select {
		case <-p.done:
		case <-time.After(retryAfter):
			return ctrl.Result{RequeueAfter: retryAfter}, nil
		}
	}
	if p := n.process(pod.UID); p != nil {
		<-p.done
	}
	err := n.client.Delete(ctx, pod, client.GracePeriodSeconds(0), client.Preconditions{UID: &pod.UID})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return ctrl.Result{}, fmt.Errorf("delete pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	n.forget(pod.UID)
	if err := os.RemoveAll(n.podDir(pod)); err != nil {
		n.cfg.Log.Error(err, "remove pod directory", "pod", client.ObjectKeyFromObject(pod))
	}
	return ctrl.Result{}, nil
}

// process is the pod's process record, or nil.
func (n *Node) process(uid types.UID) *podProcess {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.procs[uid]
}

// forget drops a pod's process record (its process has ended); a restart it waited for
// is abandoned.
func (n *Node) forget(uid types.UID) {
	n.mu.Lock()
	if p := n.procs[uid]; p != nil {
		p.abandon()
	}
	delete(n.procs, uid)
	n.mu.Unlock()
}

// forgetGone stops the processes of a pod that disappeared without a graceful deletion.
func (n *Node) forgetGone(key types.NamespacedName) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for uid, p := range n.procs {
		if p.key == key {
			p.abandon()
			p.terminate(0)
			if p.exited() {
				delete(n.procs, uid)
			}
		}
	}
}
