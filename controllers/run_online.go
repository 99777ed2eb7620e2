package controllers

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
	"github.com/vacuumops/vacuum-operator/internal/endpoints"
	"github.com/vacuumops/vacuum-operator/internal/runner/runnerwire"
)

// Online runs. A run whose target is a server never quiesces anything and mounts no volume.
// Its life before the attempts:
//  1. resolve the Service through its EndpointSlices to one ready address (server.port is
//     the Service's port, mapped to the endpoint's target port); cluster DNS is never used;
//  2. identify the server: a pod <run>-identify runs the runner with identify set, which
//     connects with the run's credentials and writes the server's system identifier
//     (pg_control_system()) to its termination message. The manager itself never reads the
//     credentials Secret;
//  3. take the server's Lease, vacuum-server-<system identifier>, in the run's namespace, so
//     two Services (or two policies) in front of one server share one lock;
//  4. run attempts as an offline run does; each attempt's RunSpec carries the address
//     resolved again and the identifier locked, which the runner checks before any table.
const (
	credentialsMountDir = "/var/run/vacuum/credentials"
	credentialsUserFile = "username"
	credentialsPassFile = "password"
	caMountDir          = "/var/run/vacuum/ca"
	identifyPodSuffix   = "-identify"
	// onlineRunnerMemory is an online runner pod's default memory request and limit: its
	// vacuum runs in the server (decisions.md).
	onlineRunnerMemory = 64 << 20
	// defaultServerPort is server.port's CRD default, for a Go client that left it out.
	defaultServerPort = 5432
)

// +kubebuilder:rbac:groups="",resources=services,verbs=get
// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,verbs=list

// serverLeaseName is the Lease guarding a server, by its system identifier (a decimal
// 64-bit number, so the name is short).
func serverLeaseName(systemIdentifier string) string {
	return "vacuum-server-" + systemIdentifier
}

// lockName is the Lease a run holds while it works: its PVC's, or its server's once
// identified ("" before, when it holds none).
func lockName(run *vacuumv1alpha1.VacuumRun) string {
	if run.Spec.Target.Server == nil {
		return leaseName(run.Spec.Target.PersistentVolumeClaim)
	}
	if run.Status.Server == nil || run.Status.Server.SystemIdentifier == "" {
		return ""
	}
	return serverLeaseName(run.Status.Server.SystemIdentifier)
}

// identifyPodName is an online run's identify pod: never a name of an attempt's pod
// (<run>-N), and within 63 characters for a run name of at most 53.
func identifyPodName(run *vacuumv1alpha1.VacuumRun) string {
	return run.Name + identifyPodSuffix
}

// targetVolumes are the volumes of the run's target: its claim, or a server's credentials
// (only the two keys named) and CA bundle.
func targetVolumes(t vacuumv1alpha1.Target) []corev1.Volume {
	srv := t.Server
	if srv == nil {
		return []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{
			ClaimName: t.PersistentVolumeClaim}}}}
	}
	cs := srv.CredentialsSecret
	vols := []corev1.Volume{{Name: "credentials", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
		SecretName: cs.Name, DefaultMode: ptr.To(int32(0o444)), Items: []corev1.KeyToPath{
			{Key: withDefault(cs.UsernameKey, "username"), Path: credentialsUserFile},
			{Key: withDefault(cs.PasswordKey, "password"), Path: credentialsPassFile},
		}}}}}
	if srv.TLS != nil && srv.TLS.CASecret != "" {
		vols = append(vols, corev1.Volume{Name: "ca", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: srv.TLS.CASecret, DefaultMode: ptr.To(int32(0o444)), Items: []corev1.KeyToPath{
				{Key: vacuumv1alpha1.CAKey, Path: vacuumv1alpha1.CAKey}}}}})
	}
	return vols
}

// targetMounts mount targetVolumes in the runner container.
func targetMounts(t vacuumv1alpha1.Target) []corev1.VolumeMount {
	if t.Server == nil {
		return []corev1.VolumeMount{{Name: "data", MountPath: runnerwire.DefaultDataDir, SubPath: t.SubPath}}
	}
	m := []corev1.VolumeMount{{Name: "credentials", MountPath: credentialsMountDir, ReadOnly: true}}
	if t.Server.TLS != nil && t.Server.TLS.CASecret != "" {
		m = append(m, corev1.VolumeMount{Name: "ca", MountPath: caMountDir, ReadOnly: true})
	}
	return m
}

// wireServer is the RunSpec's server target for a server reached at address.
func wireServer(srv *vacuumv1alpha1.ServerTarget, address, systemIdentifier string) *runnerwire.ServerTarget {
	w := &runnerwire.ServerTarget{
		Address: address, Database: srv.Database, SystemIdentifier: systemIdentifier,
		UserFile: credentialsMountDir + "/" + credentialsUserFile, PasswordFile: credentialsMountDir + "/" + credentialsPassFile,
		SSLMode: "require",
	}
	if srv.TLS != nil {
		w.SSLMode = map[vacuumv1alpha1.TLSMode]string{
			vacuumv1alpha1.TLSDisable: "disable", vacuumv1alpha1.TLSRequire: "require",
			vacuumv1alpha1.TLSVerifyCA: "verify-ca", vacuumv1alpha1.TLSVerifyFull: "verify-full",
		}[srv.TLS.Mode]
		if w.SSLMode == "" {
			w.SSLMode = "require" // a Go client that left the mode out: the CRD default
		}
		if srv.TLS.CASecret != "" {
			w.SSLRootCertFile = caMountDir + "/" + vacuumv1alpha1.CAKey
		}
	}
	return w
}

// serverAddress resolves the run's Service to one ready endpoint address (IP:target port),
// or says what it waits for. It reads without the cache, so the manager watches neither
// Services nor EndpointSlices; among ready endpoints it takes the first by slice name and
// address, so repeated reconciles agree.
func (r *RunReconciler) serverAddress(ctx context.Context, run *vacuumv1alpha1.VacuumRun) (string, string, error) {
	srv := run.Spec.Target.Server
	port := ptr.Deref(srv.Port, defaultServerPort)
	var svc corev1.Service
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: run.Namespace, Name: srv.Service}, &svc)
	switch {
	case apierrors.IsNotFound(err):
		return "", fmt.Sprintf("waiting for Service %s to exist", srv.Service), nil
	case err != nil:
		return "", "", fmt.Errorf("get Service %s/%s: %w", run.Namespace, srv.Service, err)
	}
	var svcPort *corev1.ServicePort
	for i := range svc.Spec.Ports {
		if p := &svc.Spec.Ports[i]; p.Port == port && (p.Protocol == "" || p.Protocol == corev1.ProtocolTCP) {
			svcPort = p
		}
	}
	if svcPort == nil {
		return "", fmt.Sprintf("Service %s has no TCP port %d (server.port is the Service's port)", srv.Service, port), nil
	}
	var eps discoveryv1.EndpointSliceList
	if err := r.APIReader.List(ctx, &eps, client.InNamespace(run.Namespace),
		client.MatchingLabels{discoveryv1.LabelServiceName: srv.Service}); err != nil {
		return "", "", fmt.Errorf("list EndpointSlices of Service %s/%s: %w", run.Namespace, srv.Service, err)
	}
	if ip, target, ok := endpoints.Ready(eps.Items, svcPort.Name); ok {
		return net.JoinHostPort(ip, strconv.Itoa(int(target))), "", nil
	}
	return "", fmt.Sprintf("Service %s has no ready endpoint on port %d", srv.Service, port), nil
}

// advanceOnline moves a live online run forward: endpoint, token, identity, lock, attempt.
// podStartTimeoutSeconds bounds everything before its first pod runs, counted from the
// run's creation.
func (r *RunReconciler) advanceOnline(ctx context.Context, run *vacuumv1alpha1.VacuumRun) (ctrl.Result, error) {
	since := run.CreationTimestamp.Time
	addr, msg, err := r.serverAddress(ctx, run)
	if err != nil {
		return ctrl.Result{}, err
	}
	st := &run.Status
	newAttempt := st.Attempts == 0 || st.FailedAttempts >= st.Attempts
	if addr == "" && (newAttempt || st.Server == nil) {
		return r.waitToStart(ctx, run, since, vacuumv1alpha1.ReasonEndpointNotReady, msg, stopPollInterval)
	}
	if retry, err := r.ensureTokenSecret(ctx, run); retry || err != nil {
		return ctrl.Result{RequeueAfter: conflictRetry}, err
	}
	if st.Server == nil || st.Server.SystemIdentifier == "" {
		return r.identify(ctx, run, addr, since)
	}
	lock, err := r.acquireVolumeLock(ctx, run)
	if err != nil {
		return ctrl.Result{}, err
	}
	if !lock.held {
		run.Status.MarkPending(run.Generation, vacuumv1alpha1.ReasonServerBusy,
			fmt.Sprintf("server %s (system identifier %s) is in use by run %s", st.Server.Address, st.Server.SystemIdentifier, lock.holder))
		return ctrl.Result{RequeueAfter: volumeBusyRetry}, nil
	}
	if newAttempt {
		st.Server.Address = addr // each attempt goes to a ready endpoint; the runner checks the identifier
	}
	_, res, specJSON, err := resolvedOnlineSpec(run, st.Server.Address, st.Server.SystemIdentifier, false)
	if err != nil {
		r.finish(ctx, run, verdictFailed, vacuumv1alpha1.ReasonInvalidSpec, err.Error())
		return ctrl.Result{}, nil
	}
	return r.runAttempt(ctx, run, specJSON, res, since)
}

// identify runs (or watches) the run's identify pod and records the server it found.
func (r *RunReconciler) identify(ctx context.Context, run *vacuumv1alpha1.VacuumRun, addr string, since time.Time) (ctrl.Result, error) {
	_, res, specJSON, err := resolvedOnlineSpec(run, addr, "", true)
	if err != nil {
		r.finish(ctx, run, verdictFailed, vacuumv1alpha1.ReasonInvalidSpec, err.Error())
		return ctrl.Result{}, nil
	}
	want := r.runnerPodNamed(run, identifyPodName(run), specJSON, res)
	var pod corev1.Pod
	err = r.APIReader.Get(ctx, client.ObjectKeyFromObject(want), &pod)
	switch {
	case apierrors.IsNotFound(err):
		if res, err := r.createIdentifyPod(ctx, run, want); err != nil || res != nil {
			return ptr.Deref(res, ctrl.Result{}), err
		}
		return r.waitToStart(ctx, run, since, vacuumv1alpha1.ReasonIdentifying,
			fmt.Sprintf("identifying the server at %s (pod %s)", addr, want.Name), r.ProgressInterval)
	case err != nil:
		return ctrl.Result{}, fmt.Errorf("get identify pod %s/%s: %w", want.Namespace, want.Name, err)
	case !metav1.IsControlledBy(&pod, run):
		r.refuseForeign(run, &pod)
		r.finish(ctx, run, verdictFailed, vacuumv1alpha1.ReasonForeignObject,
			fmt.Sprintf("pod %s exists and is not controlled by this run; it is left alone", pod.Name))
		return ctrl.Result{}, nil
	}
	end, ended := containerEnd(&pod)
	if !ended && (pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded) {
		end, ended = attemptEnd{ExitCode: runnerwire.ExitInternal, Message: withDefault(pod.Status.Message,
			fmt.Sprintf("identify pod %s ended %s", pod.Name, pod.Status.Phase))}, true
	}
	if !ended {
		return r.waitToStart(ctx, run, since, vacuumv1alpha1.ReasonIdentifying,
			fmt.Sprintf("identifying the server at %s: pod %s: %s", addr, pod.Name, podWaitingCause(&pod)), r.ProgressInterval)
	}
	if end.ExitCode == runnerwire.ExitOK && end.Summary != nil && end.Summary.Server != nil && end.Summary.Server.SystemIdentifier != "" {
		id := end.Summary.Server
		run.Status.Server = &vacuumv1alpha1.ServerStatus{Address: addr, SystemIdentifier: id.SystemIdentifier, Version: id.Version}
		run.Status.MarkPending(run.Generation, vacuumv1alpha1.ReasonIdentifying,
			fmt.Sprintf("identified %s at %s, system identifier %s", id.Kind, addr, id.SystemIdentifier))
		// The identify pod has done its work; the next reconcile takes the lock.
		return ctrl.Result{RequeueAfter: conflictRetry}, deleteOwnedPod(ctx, r, &pod)
	}
	v, reason, msg := judge(end, false)
	if v == verdictSucceeded { // exit 0 without an identifier: a runner that does not identify
		v, reason, msg = verdictFailed, vacuumv1alpha1.ReasonBadInput,
			fmt.Sprintf("identify pod %s exited 0 without the server's system identifier: %s", pod.Name, msg)
	}
	if v == verdictRetry {
		// Unreachable or internal: identify again (bounded by podStartTimeoutSeconds).
		if err := deleteOwnedPod(ctx, r, &pod); err != nil {
			return ctrl.Result{}, err
		}
		return r.waitToStart(ctx, run, since, vacuumv1alpha1.ReasonIdentifying,
			fmt.Sprintf("identifying the server at %s failed, retrying: %s", addr, msg), stopPollInterval)
	}
	r.finish(ctx, run, verdictFailed, reason, msg)
	return ctrl.Result{}, nil
}

// createIdentifyPod creates the identify pod; a non-nil result means the run was finished
// (the pod refused for good).
func (r *RunReconciler) createIdentifyPod(ctx context.Context, run *vacuumv1alpha1.VacuumRun, pod *corev1.Pod) (*ctrl.Result, error) {
	if err := controllerutil.SetControllerReference(run, pod, r.Scheme); err != nil {
		return nil, err
	}
	if err := checkRunnerPodSecurity(pod); err != nil {
		r.finish(ctx, run, verdictFailed, vacuumv1alpha1.ReasonInvalidSpec, err.Error())
		return &ctrl.Result{}, nil
	}
	err := r.Create(ctx, pod)
	switch {
	case err == nil:
		r.Recorder.Eventf(run, pod, corev1.EventTypeNormal, vacuumv1alpha1.ReasonPodCreated, "CreatePod",
			"created identify pod %s", pod.Name)
	case apierrors.IsAlreadyExists(err): // the next reconcile reads it
	case r.failIfRejected(ctx, run, pod, err):
		return &ctrl.Result{}, nil
	default:
		return nil, fmt.Errorf("create identify pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil, nil
}

// resolvedOnlineSpec is resolvedSpec for a server target reached at address.
func resolvedOnlineSpec(run *vacuumv1alpha1.VacuumRun, address, systemIdentifier string, identify bool) (runnerwire.RunSpec, runnerwire.Resolved, []byte, error) {
	return resolveAndEncode(func(rs *runnerwire.RunSpec) {
		rs.Server = wireServer(run.Spec.Target.Server, address, systemIdentifier)
		rs.Identify = identify
		if !identify {
			applyWindow(run, rs) // identifying is no vacuum: no window, no resume
		}
	}, &run.Spec.VacuumSpec, string(run.UID))
}
