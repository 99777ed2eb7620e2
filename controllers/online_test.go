package controllers

import (
	"encoding/json"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
	"github.com/vacuumops/vacuum-operator/internal/runner/runnerwire"
)

// Online runs: a server target reached through a Service's EndpointSlices, identified by a
// pod of its own, locked by the server's system identifier. The EndpointSlices are real
// objects of the envtest API server, written here as the EndpointSlice controller would.

// serverTarget is a server target behind service, with the credentials Secret "db-creds".
func serverTarget(service string) *vacuumv1alpha1.ServerTarget {
	return &vacuumv1alpha1.ServerTarget{Service: service, Database: "shop",
		CredentialsSecret: vacuumv1alpha1.CredentialsSecret{Name: "db-creds"}}
}

// onlineRun makes a run of a server target (edit adjusts it) and returns it as stored.
func onlineRun(ns, name, service string, edit func(*vacuumv1alpha1.VacuumRun)) *vacuumv1alpha1.VacuumRun {
	return createRun(ns, name, vacuumv1alpha1.Target{Server: serverTarget(service)}, edit)
}

// serveDatabase makes a Service whose port 5432 targets the pods' port 15432, and an
// EndpointSlice with the given endpoints (address: ready).
func serveDatabase(ns, service, slice string, endpoints map[string]bool) {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: service},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{
			{Name: "metrics", Port: 9187, TargetPort: intstr.FromInt32(9187)},
			{Name: "postgres", Port: 5432, TargetPort: intstr.FromInt32(15432)},
		}}}
	if err := k8sClient.Create(suiteCtx, svc); !apierrors.IsAlreadyExists(err) {
		Expect(err).NotTo(HaveOccurred())
	}
	eps := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: slice,
			Labels: map[string]string{discoveryv1.LabelServiceName: service}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports: []discoveryv1.EndpointPort{
			{Name: ptr.To("metrics"), Port: ptr.To(int32(9187)), Protocol: ptr.To(corev1.ProtocolTCP)},
			{Name: ptr.To("postgres"), Port: ptr.To(int32(15432)), Protocol: ptr.To(corev1.ProtocolTCP)},
		},
	}
	for addr, ready := range endpoints {
		eps.Endpoints = append(eps.Endpoints, discoveryv1.Endpoint{Addresses: []string{addr},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready)}})
	}
	Expect(k8sClient.Create(suiteCtx, eps)).To(Succeed())
}

// podRunSpec is the RunSpec a runner pod was given.
func podRunSpec(pod *corev1.Pod) runnerwire.RunSpec {
	var rs runnerwire.RunSpec
	Expect(json.Unmarshal([]byte(pod.Annotations[vacuumv1alpha1.AnnotationRunSpec]), &rs)).To(Succeed())
	return rs
}

// identified plays the identify pod's runner: it exits 0 having found systemIdentifier.
func identified(pod *corev1.Pod, systemIdentifier string) {
	sum := runnerwire.Summary{Phase: runnerwire.SummarySucceeded, Message: "identified",
		Server: &runnerwire.ServerIdentity{Kind: "PostgreSQL", Version: "PostgreSQL 15.8", SystemIdentifier: systemIdentifier}}
	b, err := json.Marshal(sum)
	Expect(err).NotTo(HaveOccurred())
	setPodTerminated(pod, 0, "Completed", string(b))
}

// reconcileUntilIdentifyPod reconciles until the run's identify pod exists.
func reconcileUntilIdentifyPod(r *RunReconciler, ns, name string) *corev1.Pod {
	for range 6 {
		reconcileRun(r, ns, name)
		var pod corev1.Pod
		if k8sClient.Get(suiteCtx, key(ns, name+identifyPodSuffix), &pod) == nil {
			return &pod
		}
	}
	Fail(fmt.Sprintf("run %s/%s made no identify pod; status %+v", ns, name, getRun(ns, name).Status))
	return nil
}

var _ = Describe("An online run's admission", func() {
	var ns string
	BeforeEach(func() { ns = newNamespace() })

	refused := func(run *vacuumv1alpha1.VacuumRun, msg string) {
		err := k8sClient.Create(suiteCtx, run)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring(msg))
	}
	bare := func(name string) *vacuumv1alpha1.VacuumRun {
		return &vacuumv1alpha1.VacuumRun{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	}

	It("takes exactly one target form", func() {
		refused(bare("neither"), "target must set exactly one of persistentVolumeClaim (an offline run) and server (an online run)")
		both := bare("both")
		both.Spec.Target.PersistentVolumeClaim = "data"
		both.Spec.Target.Server = serverTarget("db")
		refused(both, "target must set exactly one of persistentVolumeClaim")
	})

	It("refuses quiesce, subPath and bufferPoolSize with a server, naming each field", func() {
		q := bare("quiesce")
		q.Spec.Target.Server = serverTarget("db")
		q.Spec.Target.Quiesce = &vacuumv1alpha1.QuiesceTarget{Kind: "Deployment", Name: "app"}
		refused(q, "target.quiesce cannot be used with target.server")
		sp := bare("subpath")
		sp.Spec.Target.Server = serverTarget("db")
		sp.Spec.Target.SubPath = "pgdata"
		refused(sp, "target.subPath cannot be used with target.server")
		bp := bare("pool")
		bp.Spec.Target.Server = serverTarget("db")
		bp.Spec.BufferPoolSize = quantity("256Mi")
		refused(bp, "spec.bufferPoolSize cannot be used with target.server")
	})

	It("requires the credentials Secret and a CA Secret for a verified server", func() {
		noCreds := bare("nocreds")
		noCreds.Spec.Target.Server = serverTarget("db")
		noCreds.Spec.Target.Server.CredentialsSecret.Name = ""
		refused(noCreds, "spec.target.server.credentialsSecret") // omitted whole once empty (omitzero)
		noCA := bare("noca")
		noCA.Spec.Target.Server = serverTarget("db")
		noCA.Spec.Target.Server.TLS = &vacuumv1alpha1.ServerTLS{Mode: vacuumv1alpha1.TLSVerifyFull}
		refused(noCA, "target.server.tls.caSecret is required when tls.mode is VerifyCA or VerifyFull")
	})

	It("writes back no ringSize, bufferPoolSize or truncate for a server target, and port 5432", func() {
		run := onlineRun(ns, "defaults", "db", nil)
		Expect(run.Spec.RingSize).To(BeNil())
		Expect(run.Spec.BufferPoolSize).To(BeNil())
		Expect(run.Spec.Truncate).To(BeNil())
		Expect(*run.Spec.Target.Server.Port).To(BeEquivalentTo(5432))
		Expect(run.Spec.Target.Server.CredentialsSecret.UsernameKey).To(Equal("username"))
		Expect(run.Spec.Target.Server.CredentialsSecret.PasswordKey).To(Equal("password"))
	})

	It("keeps the server target immutable", func() {
		run := onlineRun(ns, "fixed", "db", nil)
		run.Spec.Target.Server.Service = "other"
		err := k8sClient.Update(suiteCtx, run)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("spec.target.server is immutable"))
	})

	It("admits a credentials Secret only from a user who may get it", func() {
		grant(ns, "carol", vacuumAuthor)
		carol := asUser("carol")
		run := bare("creds")
		run.Spec.Target.Server = serverTarget("db")
		err := carol.Create(suiteCtx, run)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("target.server.credentialsSecret: carol may not get Secret db-creds"))
		policy := &vacuumv1alpha1.VacuumPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "creds"}}
		policy.Spec.Target.Server = serverTarget("db")
		err = carol.Create(suiteCtx, policy)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("carol may not get Secret db-creds"))

		grant(ns, "carol-secret", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"},
			Verbs: []string{"get"}, ResourceNames: []string{"db-creds"}})
		rb := &rbacv1.RoleBinding{}
		Expect(k8sClient.Get(suiteCtx, key(ns, "carol-secret"), rb)).To(Succeed())
		rb.Subjects[0].Name = "carol"
		Expect(k8sClient.Update(suiteCtx, rb)).To(Succeed())
		Eventually(func() error {
			run := bare("creds")
			run.Spec.Target.Server = serverTarget("db")
			return carol.Create(suiteCtx, run)
		}, 10*time.Second, 200*time.Millisecond).Should(Succeed())

		withCA := bare("creds-ca")
		withCA.Spec.Target.Server = serverTarget("db")
		withCA.Spec.Target.Server.TLS = &vacuumv1alpha1.ServerTLS{Mode: vacuumv1alpha1.TLSVerifyCA, CASecret: "db-ca"}
		err = carol.Create(suiteCtx, withCA)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("target.server.tls.caSecret: carol may not get Secret db-ca"))
	})
})

var _ = Describe("An online run", func() {
	var (
		ns    string
		clock *clocktesting.FakeClock
		r     *RunReconciler
	)
	BeforeEach(func() { ns, clock, r, _ = runSpecStart() })

	It("waits for a ready endpoint, then identifies the server at the Service's target port of a ready one", func() {
		onlineRun(ns, "wait", "db", nil)
		reconcileRun(r, ns, "wait") // finalizer
		reconcileRun(r, ns, "wait")
		run := getRun(ns, "wait")
		Expect(run.Status.Phase).To(Equal(vacuumv1alpha1.RunPending))
		Expect(run.Status.Message).To(ContainSubstring("waiting for Service db to exist"))

		serveDatabase(ns, "db", "db-1", map[string]bool{"10.0.0.1": false})
		reconcileRun(r, ns, "wait")
		Expect(getRun(ns, "wait").Status.Message).To(ContainSubstring("Service db has no ready endpoint on port 5432"))
		Expect(podsOf(ns, "wait")).To(BeEmpty())

		serveDatabase(ns, "db", "db-2", map[string]bool{"10.0.0.3": true, "10.0.0.2": true})
		pod := reconcileUntilIdentifyPod(r, ns, "wait")
		rs := podRunSpec(pod)
		Expect(rs.Identify).To(BeTrue())
		Expect(rs.DataDir).To(BeEmpty())
		Expect(rs.Server.Address).To(Equal("10.0.0.2:15432"), "the first ready address, at the endpoint's target port")
		Expect(rs.Server.Database).To(Equal("shop"))
		Expect(rs.Server.UserFile).To(Equal(credentialsMountDir + "/username"))
		Expect(rs.Server.PasswordFile).To(Equal(credentialsMountDir + "/password"))
		Expect(rs.Server.SSLMode).To(Equal("require"))
		Expect(rs.RingSize).To(BeNil())
		Expect(rs.Truncate).To(BeNil())
		Expect(rs.BufferPoolSize).To(BeNil())
		Expect(*pod.Spec.EnableServiceLinks).To(BeFalse())
		var creds *corev1.SecretVolumeSource
		for _, v := range pod.Spec.Volumes {
			Expect(v.PersistentVolumeClaim).To(BeNil(), "an online run mounts no volume")
			if v.Name == "credentials" {
				creds = v.Secret
			}
		}
		Expect(creds).NotTo(BeNil())
		Expect(creds.SecretName).To(Equal("db-creds"))
		Expect(creds.Items).To(ConsistOf(corev1.KeyToPath{Key: "username", Path: "username"}, corev1.KeyToPath{Key: "password", Path: "password"}))
		Expect(pod.Spec.Containers[0].Resources.Limits.Memory().Value()).To(BeEquivalentTo(onlineRunnerMemory))
		Expect(getRun(ns, "wait").Status.Conditions).To(ContainElement(HaveField("Reason", vacuumv1alpha1.ReasonIdentifying)))
	})

	It("records the server, takes the Lease of its system identifier and gives the attempt both", func() {
		serveDatabase(ns, "db", "db-1", map[string]bool{"10.0.0.9": true})
		onlineRun(ns, "go", "db", func(run *vacuumv1alpha1.VacuumRun) { run.Spec.Mode = vacuumv1alpha1.VacuumModeFull })
		identified(reconcileUntilIdentifyPod(r, ns, "go"), "7301234567890123456")
		pod := reconcileUntilPod(r, ns, "go", 1)
		run := getRun(ns, "go")
		Expect(run.Status.Server).To(Equal(&vacuumv1alpha1.ServerStatus{Address: "10.0.0.9:15432",
			SystemIdentifier: "7301234567890123456", Version: "PostgreSQL 15.8"}))
		var lease coordinationv1.Lease
		Expect(k8sClient.Get(suiteCtx, key(ns, "vacuum-server-7301234567890123456"), &lease)).To(Succeed())
		Expect(*lease.Spec.HolderIdentity).To(Equal(string(run.UID)))
		rs := podRunSpec(pod)
		Expect(rs.Identify).To(BeFalse())
		Expect(rs.Server.Address).To(Equal("10.0.0.9:15432"))
		Expect(rs.Server.SystemIdentifier).To(Equal("7301234567890123456"))
		Expect(rs.IndexWorkers).To(BeNil(), "a Full run is not sent indexWorkers")
		Expect(apierrors.IsNotFound(k8sClient.Get(suiteCtx, key(ns, "go"+identifyPodSuffix), &corev1.Pod{}))).To(BeTrue(),
			"the identify pod is deleted once read")

		// The run's end releases the server's lock.
		setPodTerminated(pod, 0, "Completed", `{"phase":"Succeeded","exitCode":0,"message":"vacuumed 1 tables","totals":{},"tables":[],"tablesOmitted":0,"server":null}`)
		reconcileRun(r, ns, "go")
		reconcileRun(r, ns, "go")
		Expect(getRun(ns, "go").Status.Phase).To(Equal(vacuumv1alpha1.RunSucceeded))
		Eventually(func() bool {
			reconcileRun(r, ns, "go")
			return apierrors.IsNotFound(k8sClient.Get(suiteCtx, key(ns, "vacuum-server-7301234567890123456"), &coordinationv1.Lease{}))
		}, 10*time.Second, 100*time.Millisecond).Should(BeTrue())
	})

	It("shows the foreground, the standbys' lag and when a throttle change applies, from the runner's progress", func() {
		serveDatabase(ns, "db", "db-1", map[string]bool{"10.0.0.9": true})
		onlineRun(ns, "fg", "db", nil)
		identified(reconcileUntilIdentifyPod(r, ns, "fg"), "7301234567890123456")
		pod := reconcileUntilPod(r, ns, "fg", 1)
		Expect(getRun(ns, "fg").Status.Foreground).To(BeNil(), "nothing before the runner reports")
		Expect(getRun(ns, "fg").Status.Replication).To(BeNil(), "nothing before the runner reports")
		ip := freshIP()
		runner := startFakeRunner(ip, runToken(testKey, getRun(ns, "fg").UID))
		defer runner.Close()
		setPodRunning(pod, ip)
		reconcileRunAnswered(r, ns, "fg")
		run := getRun(ns, "fg")
		Expect(run.Status.Phase).To(Equal(vacuumv1alpha1.RunRunning))
		// progress.json: 421 statements/s at p50 312 us and p99 2650 us; 2040 us before the vacuum.
		Expect(run.Status.Foreground).To(Equal(&vacuumv1alpha1.ForegroundStatus{P50: "312µs", P99: "2.65ms",
			StatementsPerSecond: 421, BaselineP99: "2.04ms", P99VsBaselinePerMille: ptr.To(int64(1299)), P99VsBaseline: "1.3x"}))
		Expect(run.Status.Server.ThrottleApplies).To(Equal(runnerwire.ThrottleAppliesImmediately))
		// progress.json: one standby 64 KiB and 250 ms behind now, at most 1 MiB and 1.5 s.
		Expect(run.Status.Replication).To(Equal(&vacuumv1alpha1.ReplicationStatus{Standbys: 1, LagBytes: 65536,
			ReplayLag: "250ms", MaxLagBytes: 1 << 20, MaxReplayLag: "1.5s", Lag: "64.0KiB/250ms", MaxLag: "1.0MiB/1.5s"}))
	})

	It("fails at once with BadInput when the runner is refused by the server", func() {
		serveDatabase(ns, "db", "db-1", map[string]bool{"10.0.0.9": true})
		onlineRun(ns, "auth", "db", nil)
		pod := reconcileUntilIdentifyPod(r, ns, "auth")
		setPodTerminated(pod, runnerwire.ExitBadInput, "Error",
			`{"phase":"Failed","exitCode":2,"message":"authentication failed","totals":{},"tables":[],"tablesOmitted":0,"server":null}`)
		reconcileRun(r, ns, "auth")
		run := getRun(ns, "auth")
		Expect(run.Status.Phase).To(Equal(vacuumv1alpha1.RunFailed))
		Expect(run.Status.Conditions).To(ContainElement(HaveField("Reason", vacuumv1alpha1.ReasonBadInput)))
		Expect(run.Status.Attempts).To(BeZero())
	})

	It("holds one lock per server across two policies whose Services front the same server", func() {
		serveDatabase(ns, "db-a", "db-a-1", map[string]bool{"10.0.0.9": true})
		serveDatabase(ns, "db-b", "db-b-1", map[string]bool{"10.0.0.9": true})
		pr, _ := newPolicyReconciler(clock)
		for _, p := range []struct{ name, service string }{{"nightly", "db-a"}, {"hourly", "db-b"}} {
			policy := &vacuumv1alpha1.VacuumPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: p.name}}
			policy.Spec.Target.Server = serverTarget(p.service)
			Expect(k8sClient.Create(suiteCtx, policy)).To(Succeed())
			reconcilePolicy(pr, ns, p.name)
		}
		Expect(runNames(ns)).To(ConsistOf("nightly-once", "hourly-once"))
		identified(reconcileUntilIdentifyPod(r, ns, "nightly-once"), "42")
		reconcileUntilPod(r, ns, "nightly-once", 1)
		identified(reconcileUntilIdentifyPod(r, ns, "hourly-once"), "42")
		reconcileRun(r, ns, "hourly-once")
		reconcileRun(r, ns, "hourly-once")
		hourly := getRun(ns, "hourly-once")
		Expect(hourly.Status.Phase).To(Equal(vacuumv1alpha1.RunPending))
		Expect(hourly.Status.Conditions).To(ContainElement(HaveField("Reason", vacuumv1alpha1.ReasonServerBusy)))
		Expect(hourly.Status.Message).To(ContainSubstring("in use by run nightly-once"))
		Expect(podsOf(ns, "hourly-once")).To(BeEmpty())

		// Once the first run ends and lets go, the second takes the lock.
		setPodTerminated(getPod(ns, "nightly-once-1"), 0, "Completed",
			`{"phase":"Succeeded","exitCode":0,"message":"done","totals":{},"tables":[],"tablesOmitted":0,"server":null}`)
		for range 3 {
			reconcileRun(r, ns, "nightly-once")
		}
		Expect(getRun(ns, "nightly-once").Status.Phase).To(Equal(vacuumv1alpha1.RunSucceeded))
		pod := reconcileUntilPod(r, ns, "hourly-once", 1)
		Expect(podRunSpec(pod).Server.SystemIdentifier).To(Equal("42"))
	})
})
