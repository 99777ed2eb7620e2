package e2e

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vacuumops/vacuum-operator/internal/devcluster"
	"github.com/vacuumops/vacuum-operator/internal/endpoints"
)

// The app of these specs is the engine server, from the image's /engine-server (the local node
// maps devcluster.RunnerImage to the suite's bin directory), serving /data on its pod address.
const (
	appUser     = "app"
	appPassword = "app-secret"
)

// needEndpoints skips a spec that needs EndpointSlices when the local node's pods have
// loopback addresses (not root), which the API server refuses in them.
func needEndpoints() {
	if cluster.Loopback {
		Skip("the local node gives pods loopback addresses here (routing " + cluster.PodCIDR + " needs root): no EndpointSlice can carry them")
	}
}

// usersSecret creates the engine server's users file as Secret "users".
func usersSecret(ns string) {
	GinkgoHelper()
	Expect(cluster.Client.Create(suiteCtx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "users"},
		StringData: map[string]string{"users": appUser + ":" + appPassword + "\n"},
	})).To(Succeed())
}

// engineServerPod is the pod template of an engine server on /data, whose volume is data.
func engineServerPod(app string, data *corev1.Volume) corev1.PodTemplateSpec {
	volumes := []corev1.Volume{{Name: "users", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "users"}}}}
	if data != nil {
		volumes = append(volumes, *data)
	}
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app}},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name: "db", Image: devcluster.RunnerImage, Command: []string{"/engine-server"},
				Args: []string{"serve", "--init", "--data", "/data", "--listen", "$(POD_IP):5432", "--users-file", "/etc/users/users"},
				Env: []corev1.EnvVar{{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{
					FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}}},
				Ports:        []corev1.ContainerPort{{Name: "postgres", ContainerPort: 5432}},
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}, {Name: "users", MountPath: "/etc/users"}},
			}},
			Volumes:                       volumes,
			TerminationGracePeriodSeconds: ptr.To(int64(10)),
		},
	}
}

// service creates Service app in front of the pods labelled app=app, port 5432.
func service(ns, app string) {
	GinkgoHelper()
	Expect(cluster.Client.Create(suiteCtx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: app},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": app},
			Ports: []corev1.ServicePort{{Name: "postgres", Port: 5432, TargetPort: intstr.FromString("postgres")}}},
	})).To(Succeed())
}

// statefulSet creates StatefulSet app of the engine server, one replica; claim is nil for a
// volumeClaimTemplate "data" (claim data-<app>-0), else the template still names "data" and
// the claim data-<app>-0 made beforehand is the one it uses.
func statefulSet(ns, app string, replicas int32) *appsv1.StatefulSet {
	GinkgoHelper()
	st := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: app},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To(replicas), ServiceName: app,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
			Template: engineServerPod(app, nil),
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
				},
			}},
		},
	}
	Expect(cluster.Client.Create(suiteCtx, st)).To(Succeed())
	return st
}

// deployment creates Deployment app of the engine server with data as its volume "data".
func deployment(ns, app string, replicas int32, data *corev1.Volume) *appsv1.Deployment {
	GinkgoHelper()
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: app},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
			Template: engineServerPod(app, data),
			// One pod on the volume at a time, as an app on a ReadWriteOnce claim needs.
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
		},
	}
	Expect(cluster.Client.Create(suiteCtx, d)).To(Succeed())
	return d
}

// readyPods waits until exactly n pods labelled app=app run Ready, and returns them.
func readyPods(ns, app string, n int) []corev1.Pod {
	GinkgoHelper()
	var pods []corev1.Pod
	Eventually(func(g Gomega) {
		var list corev1.PodList
		g.Expect(cluster.Client.List(suiteCtx, &list, client.InNamespace(ns), client.MatchingLabels{"app": app})).To(Succeed())
		pods = nil
		for _, p := range list.Items {
			if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && podReady(&p) {
				pods = append(pods, p)
			}
		}
		g.Expect(pods).To(HaveLen(n), "ready pods of %s (%d listed)", app, len(list.Items))
	}).WithTimeout(60 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
	return pods
}

// noPods waits until no pod labelled app=app is left.
func noPods(ns, app string) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		var list corev1.PodList
		g.Expect(cluster.Client.List(suiteCtx, &list, client.InNamespace(ns), client.MatchingLabels{"app": app})).To(Succeed())
		g.Expect(list.Items).To(BeEmpty())
	}).WithTimeout(60 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// serviceEndpoint waits until the Service's EndpointSlices (the endpointslice controller's)
// give ip one ready endpoint, through the operator's own resolution, and returns it.
func serviceEndpoint(ns, svc, ip string) string {
	GinkgoHelper()
	var addr string
	Eventually(func(g Gomega) {
		var slices discoveryv1.EndpointSliceList
		g.Expect(cluster.Client.List(suiteCtx, &slices, client.InNamespace(ns),
			client.MatchingLabels{discoveryv1.LabelServiceName: svc})).To(Succeed())
		got, port, ok := endpoints.Ready(slices.Items, "postgres")
		g.Expect(ok).To(BeTrue(), "no ready endpoint in %d EndpointSlices of %s", len(slices.Items), svc)
		g.Expect(got).To(Equal(ip))
		addr = net.JoinHostPort(got, strconv.Itoa(int(port)))
	}).WithTimeout(60 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
	return addr
}

// query connects to the engine server at addr with SCRAM and runs one statement.
func query(addr, sql string) {
	GinkgoHelper()
	Eventually(func() error {
		ctx, cancel := context.WithTimeout(suiteCtx, 5*time.Second)
		defer cancel()
		host, port, _ := net.SplitHostPort(addr)
		conn, err := pgx.Connect(ctx, fmt.Sprintf("host=%s port=%s user=%s password=%s dbname=postgres sslmode=disable", host, port, appUser, appPassword))
		if err != nil {
			return err
		}
		defer func() { _ = conn.Close(context.Background()) }()
		_, err = conn.Exec(ctx, sql)
		return err
	}).WithTimeout(20*time.Second).WithPolling(200*time.Millisecond).Should(Succeed(), "%s at %s", sql, addr)
}

// podPid is the process id of a pod's container, from the local node's pid file.
func podPid(pod *corev1.Pod) int {
	GinkgoHelper()
	b, err := os.ReadFile(filepath.Join(cluster.NodeStateDir, "pods", fmt.Sprintf("%s_%s_%s", pod.Namespace, pod.Name, pod.UID), "pid"))
	Expect(err).NotTo(HaveOccurred())
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	Expect(err).NotTo(HaveOccurred())
	return pid
}

var _ = Describe("Workloads on the dev cluster's real kube-controller-manager", func() {
	It("runs a StatefulSet on a provisioned claim behind its Service's EndpointSlice, restarts its container in place, and garbage-collects a deleted Deployment's pods", func() {
		needEndpoints()
		ns := newNamespace()
		usersSecret(ns)
		service(ns, "db")
		statefulSet(ns, "db", 1)

		By("the StatefulSet controller's pod runs on a claim the local node provisioned")
		pod := readyPods(ns, "db", 1)[0]
		Expect(pod.Name).To(Equal("db-0"))
		Expect(netip.MustParsePrefix(cluster.PodCIDR).Contains(netip.MustParseAddr(pod.Status.PodIP))).To(BeTrue(),
			"pod address %s is not in the node's range %s", pod.Status.PodIP, cluster.PodCIDR)
		var pvc corev1.PersistentVolumeClaim
		Expect(cluster.Client.Get(suiteCtx, client.ObjectKey{Namespace: ns, Name: "data-db-0"}, &pvc)).To(Succeed())
		Expect(pvc.Status.Phase).To(Equal(corev1.ClaimBound))

		By("the endpointslice controller publishes the pod, and the engine server answers there")
		addr := serviceEndpoint(ns, "db", pod.Status.PodIP)
		query(addr, "CREATE TABLE t (id int4 PRIMARY KEY, v text)")

		By("a killed server is restarted in its pod (restartPolicy Always), on the same address and claim")
		Expect(syscall.Kill(podPid(&pod), syscall.SIGKILL)).To(Succeed())
		Eventually(func(g Gomega) {
			var p corev1.Pod
			g.Expect(cluster.Client.Get(suiteCtx, client.ObjectKeyFromObject(&pod), &p)).To(Succeed())
			g.Expect(p.UID).To(Equal(pod.UID))
			g.Expect(p.Status.ContainerStatuses).To(HaveLen(1))
			g.Expect(p.Status.ContainerStatuses[0].RestartCount).To(BeEquivalentTo(1))
			g.Expect(podReady(&p)).To(BeTrue())
		}).WithTimeout(60 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
		addr = serviceEndpoint(ns, "db", pod.Status.PodIP)
		query(addr, "INSERT INTO t VALUES (1, 'after the restart')") // the table survived: same volume

		By("a Deployment's ReplicaSet runs its pods, and deleting the Deployment garbage-collects them")
		d := deployment(ns, "web", 2, &corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
		web := readyPods(ns, "web", 2)
		Expect(web[0].Status.PodIP).NotTo(Equal(web[1].Status.PodIP))
		Expect(web[0].OwnerReferences).To(ContainElement(HaveField("Kind", "ReplicaSet")))
		Expect(cluster.Client.Delete(suiteCtx, d, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
		noPods(ns, "web")
		var rsets appsv1.ReplicaSetList
		Expect(cluster.Client.List(suiteCtx, &rsets, client.InNamespace(ns))).To(Succeed())
		Expect(rsets.Items).To(BeEmpty())
	})
})
